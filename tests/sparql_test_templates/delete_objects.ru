# Test only: delete every quad whose object is one of the given terms.
# Parameters: values ?o (terms).
DELETE { GRAPH ?g { ?s ?p ?o } } WHERE { GRAPH ?g { VALUES ?o { } ?s ?p ?o } }
