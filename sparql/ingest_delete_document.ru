# Deletes one document from a collection, in one update (all of it or nothing):
#   1. the facts of its subgraphs that no other subgraph of the collection contains (a fact another document
#      also states stays) and that the collection did not hold before the ingest with no provenance (tg:kept:
#      loaded as RDF),
#   2. the rdfs:labels it wrote (tg:labelled) of terms that the collection graph no longer uses,
#   3. its librarian text (document, pages, chunks) unless another collection holds the same document,
#   4. its software agent, unless another activity of the collection refers to it,
#   5. its provenance: the document, its pages, chunks, subgraphs and ingest activity.
# Parameters: VALUES (?doc ?kg ?src) { } one row: the document, the collection graph and its source graph
# (every block below is filled with that row).
# LATERAL evaluates each group with ?doc bound. Without it a group is evaluated on its own before the join:
# step 1 then walked every document of the sample (500 s instead of 40 ms), and a bare
# { BIND(?doc AS ?node) } would leave ?node unbound, so that the delete matched every node.
PREFIX tg: <https://trustgraph.ai/ns/>
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>

DELETE { GRAPH ?kg { ?s ?p ?o } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  LATERAL {
    GRAPH ?src {
      ?page prov:wasDerivedFrom ?doc . ?chunk prov:wasDerivedFrom ?page . ?sg prov:wasDerivedFrom ?chunk ; tg:contains ?fact .
      FILTER(isTRIPLE(?fact))
    }
  }
  LATERAL {
    FILTER NOT EXISTS {
      GRAPH ?src {
        { ?other tg:contains ?fact } UNION { ?reifier rdf:reifies ?fact . ?other tg:contains ?reifier }
        FILTER NOT EXISTS { ?other prov:wasDerivedFrom/prov:wasDerivedFrom/prov:wasDerivedFrom ?doc }
      }
    }
  }
  LATERAL { FILTER NOT EXISTS { GRAPH ?src { ?anyActivity tg:kept ?fact } } }
  BIND(SUBJECT(?fact) AS ?s) BIND(PREDICATE(?fact) AS ?p) BIND(OBJECT(?fact) AS ?o)
} ;

DELETE { GRAPH ?kg { ?term rdfs:label ?label } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  LATERAL { GRAPH ?src { ?activity prov:used ?doc ; tg:labelled ?term } }
  LATERAL {
    GRAPH ?kg {
      ?term rdfs:label ?label .
      FILTER NOT EXISTS { ?term ?anyPredicate ?anyObject . FILTER(?anyPredicate != rdfs:label) }
      FILTER NOT EXISTS { ?anySubject ?term ?anyValue }
      FILTER NOT EXISTS { ?someSubject ?somePredicate ?term }
    }
  }
} ;

DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?node ?p ?o } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  FILTER NOT EXISTS { GRAPH ?elsewhere { ?doc a tg:Document } FILTER(?elsewhere != ?src) }
  LATERAL {
    { BIND(?doc AS ?node) }
    UNION { GRAPH ?src { ?node prov:wasDerivedFrom ?doc ; a tg:Page } }
    UNION { GRAPH ?src { ?node prov:wasDerivedFrom/prov:wasDerivedFrom ?doc ; a tg:Chunk } }
  }
  GRAPH <urn:trustgraph:graph:librarian> { ?node ?p ?o }
} ;

DELETE { GRAPH ?src { ?agent ?p ?o } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  LATERAL {
    GRAPH ?src {
      ?activity prov:used ?doc ; prov:wasAssociatedWith ?agent .
      FILTER NOT EXISTS { ?otherActivity prov:wasAssociatedWith ?agent . FILTER(?otherActivity != ?activity) }
      ?agent ?p ?o .
    }
  }
} ;

DELETE { GRAPH ?src { ?node ?p ?o } }
WHERE {
  VALUES (?doc ?kg ?src) { }
  LATERAL {
    { BIND(?doc AS ?node) }
    UNION { GRAPH ?src { ?node prov:wasDerivedFrom ?doc ; a tg:Page } }
    UNION { GRAPH ?src { ?node prov:wasDerivedFrom/prov:wasDerivedFrom ?doc ; a tg:Chunk } }
    UNION { GRAPH ?src { ?node prov:wasDerivedFrom/prov:wasDerivedFrom/prov:wasDerivedFrom ?doc ; a tg:Subgraph } }
    UNION { GRAPH ?src { ?node prov:used ?doc ; a prov:Activity } }
  }
  GRAPH ?src { ?node ?p ?o }
}
