/* RDF terms of SPARQL 1.2 JSON results as DOM nodes: IRIs link to the resource page,
   triple terms read <<( s p o )>> with each part rendered (and linked) in turn. */
"use strict";

const GlassTerms = (() => {
  const XSD_STRING = "http://www.w3.org/2001/XMLSchema#string";
  let prefixes = {};

  function setPrefixes(map) {
    prefixes = map || {};
  }

  function compact(iri) {
    for (const [prefix, base] of Object.entries(prefixes)) {
      if (iri.startsWith(base) && iri.length > base.length) return `${prefix}:${iri.slice(base.length)}`;
    }
    return iri;
  }

  function span(cls, text) {
    const node = document.createElement("span");
    node.className = cls;
    node.textContent = text;
    return node;
  }

  function iriLink(iri) {
    const link = document.createElement("a");
    link.className = "iri";
    link.href = `/resource?iri=${encodeURIComponent(iri)}`;
    link.title = iri;
    link.textContent = compact(iri);
    return link;
  }

  function render(term) {
    switch (term.type) {
      case "uri":
        return iriLink(term.value);
      case "bnode":
        return span("bnode", `_:${term.value}`);
      case "triple": {
        const node = span("triple", "<<( ");
        for (const part of ["subject", "predicate", "object"]) {
          node.append(render(term.value[part]), " ");
        }
        node.append(")>>");
        return node;
      }
      default: {  // "literal" (and the old "typed-literal")
        const node = document.createElement("span");
        node.append(span("literal", term.value));
        if (term["xml:lang"]) node.append(span("lang", `@${term["xml:lang"]}`));
        else if (term.datatype && term.datatype !== XSD_STRING) {
          node.append(span("datatype", `^^${compact(term.datatype)}`));
        }
        return node;
      }
    }
  }

  return { setPrefixes, compact, render };
})();
