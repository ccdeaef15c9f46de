# Deletes GraphRAG sessions (the retention policy): each session's entities in the explainability graph
# (session, retrieval, selection and its edge selections, answer) and its answer text in the librarian graph.
# Parameters: VALUES (?session ?eg) { } one row per session: the session IRI and the explainability graph
# (every block below is filled with the same rows).
# LATERAL evaluates each group with ?session bound (the join-order trap: see ingest_delete_document.ru).
PREFIX tg: <https://trustgraph.ai/ns/>
PREFIX prov: <http://www.w3.org/ns/prov#>

DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?text ?p ?o } }
WHERE {
  VALUES (?session ?eg) { }
  LATERAL {
    GRAPH ?eg { ?retrieval prov:wasGeneratedBy ?session . ?selection prov:wasDerivedFrom ?retrieval .
                ?answer prov:wasDerivedFrom ?selection ; tg:document ?text }
  }
  GRAPH <urn:trustgraph:graph:librarian> { ?text ?p ?o }
} ;

DELETE { GRAPH ?eg { ?node ?p ?o } }
WHERE {
  VALUES (?session ?eg) { }
  LATERAL {
    { BIND(?session AS ?node) }
    UNION { GRAPH ?eg { ?node prov:wasGeneratedBy ?session } }
    UNION { GRAPH ?eg { ?node prov:wasDerivedFrom/prov:wasGeneratedBy ?session } }
    UNION { GRAPH ?eg { ?selection prov:wasDerivedFrom/prov:wasGeneratedBy ?session ; tg:selectedEdge ?node } }
    UNION { GRAPH ?eg { ?node prov:wasDerivedFrom/prov:wasDerivedFrom/prov:wasGeneratedBy ?session } }
  }
  GRAPH ?eg { ?node ?p ?o }
}
