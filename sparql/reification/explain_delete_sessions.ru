# The reification dialect's explain_delete_sessions.ru (see it for what it deletes), without LATERAL: the
# sessions' VALUES block is repeated in each group, so that each is evaluated with the session bound.
# Statement nodes named by the deleted entities stay: other sessions may name the same statements.
# Parameters: VALUES (?{{ stages[0].kind }} ?eg) { } one row per session (every block is filled with them).
PREFIX tg: <https://trustgraph.ai/ns/>
PREFIX prov: <http://www.w3.org/ns/prov#>

DELETE { GRAPH <urn:trustgraph:graph:librarian> { ?text ?p ?o } }
WHERE {
  VALUES (?{{ stages[0].kind }} ?eg) { }
  GRAPH ?eg {
{%- for stage in stages[1:] %}
    ?{{ stage.kind }} {{ stage.link }} ?{{ stage.previous }} .
{%- endfor %}
    ?{{ stages[-1].kind }} tg:document ?text
  }
  GRAPH <urn:trustgraph:graph:librarian> { ?text ?p ?o }
} ;

DELETE { GRAPH ?eg { ?node ?p ?o } }
WHERE {
  { VALUES (?{{ stages[0].kind }} ?eg) { } BIND(?{{ stages[0].kind }} AS ?node) }
{%- for stage in stages[1:] %}
  UNION { VALUES (?{{ stages[0].kind }} ?eg) { } GRAPH ?eg { ?node {{ stage.path }} ?{{ stages[0].kind }} } }
{%- for member in stage.members %}
  UNION { VALUES (?{{ stages[0].kind }} ?eg) { }
          GRAPH ?eg { ?entity {{ stage.path }} ?{{ stages[0].kind }} ; {{ member }} ?node } }
{%- endfor %}
{%- endfor %}
  GRAPH ?eg { ?node ?p ?o }
}
