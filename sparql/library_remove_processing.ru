# Removes one processing record of the library (TrustGraph's remove-processing): the record only, not what its
# ingest wrote. Parameters: VALUES ?processing { } one row: the record's IRI.
PREFIX tg: <https://trustgraph.ai/ns/>
DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?processing ?p ?o } }
WHERE {
  VALUES ?processing { }
  GRAPH <urn:trustgraph:graph:librarian> { ?processing a tg:Processing ; ?p ?o }
}
