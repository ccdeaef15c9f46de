# Replace a collection's data version (see store_data_version.rq) after a write into it.
# Parameters: values (?graph ?new) one row: the collection graph and a fresh token (a uuid4 literal).
PREFIX tg: <https://trustgraph.ai/ns/>
DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?graph tg:dataVersion ?old } }
INSERT { GRAPH <urn:trustgraph:graph:librarian> { ?graph tg:dataVersion ?new } }
WHERE {
  VALUES (?graph ?new) { }
  OPTIONAL { GRAPH <urn:trustgraph:graph:librarian> { ?graph tg:dataVersion ?old } }
}
