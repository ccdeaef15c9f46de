# The reification dialect's ingest_delete_document.ru (see it for the five steps), in plain SPARQL 1.1: a fact
# is its statement node (tg:contains <st>, tg:kept <st>), read apart by rdf:subject/predicate/object; the
# document's VALUES block is repeated in each group instead of LATERAL. Statement descriptions stay in the
# source graph: another subgraph may name the same statement.
# Parameters: VALUES (?doc ?kg ?src) { } one row (every block is filled with it).
PREFIX tg: <https://trustgraph.ai/ns/>
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>

DELETE { GRAPH ?kg { ?s ?p ?o } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  GRAPH ?src {
    ?page prov:wasDerivedFrom ?doc . ?chunk prov:wasDerivedFrom ?page . ?sg prov:wasDerivedFrom ?chunk ; tg:contains ?fact .
    ?fact a rdf:Statement ; rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o .
  }
  FILTER NOT EXISTS {
    GRAPH ?src {
      ?other tg:contains ?fact .
      FILTER NOT EXISTS { ?other prov:wasDerivedFrom/prov:wasDerivedFrom/prov:wasDerivedFrom ?doc }
    }
  }
  FILTER NOT EXISTS { GRAPH ?src { ?anyActivity tg:kept ?fact } }
} ;

DELETE { GRAPH ?kg { ?term rdfs:label ?label } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  GRAPH ?src { ?activity prov:used ?doc ; tg:labelled ?term }
  GRAPH ?kg {
    ?term rdfs:label ?label .
    FILTER NOT EXISTS { ?term ?anyPredicate ?anyObject . FILTER(?anyPredicate != rdfs:label) }
    FILTER NOT EXISTS { ?anySubject ?term ?anyValue }
    FILTER NOT EXISTS { ?someSubject ?somePredicate ?term }
  }
} ;

DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?node ?p ?o } }
WHERE {
  {
    { VALUES (?doc ?kg ?src) { } BIND(?doc AS ?node) }
    UNION { VALUES (?doc ?kg ?src) { } GRAPH ?src { ?node prov:wasDerivedFrom ?doc ; a tg:Page } }
    UNION { VALUES (?doc ?kg ?src) { } GRAPH ?src { ?node prov:wasDerivedFrom/prov:wasDerivedFrom ?doc ; a tg:Chunk } }
  }
  FILTER NOT EXISTS { GRAPH ?elsewhere { ?doc a tg:Document } FILTER(?elsewhere != ?src) }
  GRAPH <urn:trustgraph:graph:librarian> { ?node ?p ?o }
} ;

DELETE { GRAPH ?src { ?agent ?p ?o } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  GRAPH ?src {
    ?activity prov:used ?doc ; prov:wasAssociatedWith ?agent .
    FILTER NOT EXISTS { ?otherActivity prov:wasAssociatedWith ?agent . FILTER(?otherActivity != ?activity) }
    ?agent ?p ?o .
  }
} ;

DELETE { GRAPH ?src { ?node ?p ?o } }
WHERE {
  { VALUES (?doc ?kg ?src) { } BIND(?doc AS ?node) }
  UNION { VALUES (?doc ?kg ?src) { } GRAPH ?src { ?node prov:wasDerivedFrom ?doc ; a tg:Page } }
  UNION { VALUES (?doc ?kg ?src) { } GRAPH ?src { ?node prov:wasDerivedFrom/prov:wasDerivedFrom ?doc ; a tg:Chunk } }
  UNION { VALUES (?doc ?kg ?src) { }
          GRAPH ?src { ?node prov:wasDerivedFrom/prov:wasDerivedFrom/prov:wasDerivedFrom ?doc ; a tg:Subgraph } }
  UNION { VALUES (?doc ?kg ?src) { } GRAPH ?src { ?node prov:used ?doc ; a prov:Activity } }
  GRAPH ?src { ?node ?p ?o }
}
