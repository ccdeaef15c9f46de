# Test only: insert one quad per row.
# Parameters: values (?s ?p ?o ?g).
INSERT { GRAPH ?g { ?s ?p ?o } } WHERE { VALUES (?s ?p ?o ?g) { } }
