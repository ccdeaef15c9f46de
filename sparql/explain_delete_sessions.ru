# Deletes sessions (the retention policy): each session's entities in the explainability graph (the session,
# each later stage's entity and the nodes it lists: edge selections, passages, cited spans) and its answer text
# in the librarian graph. The chain of stages is written from their declaration (server/stages.py).
# Parameters: VALUES (?{{ stages[0].kind }} ?eg) { } one row per session: the session IRI and the explainability
# graph (every block below is filled with the same rows).
# LATERAL evaluates each group with the session bound (the join-order trap: see ingest_delete_document.ru).
PREFIX tg: <https://trustgraph.ai/ns/>
PREFIX prov: <http://www.w3.org/ns/prov#>

DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?text ?p ?o } }
WHERE {
  VALUES (?{{ stages[0].kind }} ?eg) { }
  LATERAL {
    GRAPH ?eg {
{%- for stage in stages[1:] %}
      ?{{ stage.kind }} {{ stage.link }} ?{{ stage.previous }} .
{%- endfor %}
      ?{{ stages[-1].kind }} tg:document ?text
    }
  }
  GRAPH <urn:trustgraph:graph:librarian> { ?text ?p ?o }
} ;

DELETE { GRAPH ?eg { ?node ?p ?o } }
WHERE {
  VALUES (?{{ stages[0].kind }} ?eg) { }
  LATERAL {
    { BIND(?{{ stages[0].kind }} AS ?node) }
{%- for stage in stages[1:] %}
    UNION { GRAPH ?eg { ?node {{ stage.path }} ?{{ stages[0].kind }} } }
{%- for member in stage.members %}
    UNION { GRAPH ?eg { ?entity {{ stage.path }} ?{{ stages[0].kind }} ; {{ member }} ?node } }
{%- endfor %}
{%- endfor %}
  }
  GRAPH ?eg { ?node ?p ?o }
}
