/* Reads explain triples (TrustGraph's wire shape, server/explain/wire.py: {s, p, o, g} with terms
   {t:"i", i}, {t:"l", v, d, l}, {t:"r", r:{s, p, o}}, {t:"b", b}) into what the console shows of a trace:
   seeds, retrieved edges, selected edges with their reason and source chains, labels. The Ask page feeds it
   the stream's steps; the trace page the same triples read back from the store. */
"use strict";

const GlassExplain = (() => {
  const TG = "https://trustgraph.ai/ns/";
  const LABEL = "http://www.w3.org/2000/01/rdf-schema#label";
  const TITLE = "http://purl.org/dc/elements/1.1/title";
  const TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
  const DERIVED = "http://www.w3.org/ns/prov#wasDerivedFrom";
  const KINDS = { [TG + "Document"]: "Document", [TG + "Page"]: "Page", [TG + "Chunk"]: "Chunk" };

  /** A term's identity: an IRI, or the JSON of anything else (literals and triple terms). */
  /** A term's identity as a string: an IRI as itself, a literal as JSON, a triple term from its parts'
   * keys (JSON.stringify with a key list would filter the nested terms' keys too, so that every triple
   * term had one key). */
  function key(term) {
    if (term.t === "i") return term.i;
    if (term.t === "l") return JSON.stringify([term.v, term.d || "", term.l || ""]);
    if (term.t === "r") return `<<( ${key(term.r.s)} ${key(term.r.p)} ${key(term.r.o)} )>>`;
    return `_:${term.b || ""}`;
  }

  function lexical(term) {
    if (term.t === "i") return term.i;
    if (term.t === "l") return term.v;
    if (term.t === "r") return `<<( ${lexical(term.r.s)} ${lexical(term.r.p)} ${lexical(term.r.o)} )>>`;
    return `_:${term.b || ""}`;
  }

  /** A term in N-Triples (what the source viewer's ``edge`` parameter takes). */
  function ntriples(term) {
    if (term.t === "i") return `<${term.i}>`;
    if (term.t === "r") return `<<( ${ntriples(term.r.s)} ${ntriples(term.r.p)} ${ntriples(term.r.o)} )>>`;
    if (term.t === "b") return `_:${term.b || "b"}`;
    const text = `"${term.v.replace(/[\\"\n\r]/g, (c) => ({ "\\": "\\\\", "\"": "\\\"", "\n": "\\n", "\r": "\\r" })[c])}"`;
    if (term.l) return `${text}@${term.l}`;
    return term.d ? `${text}^^<${term.d}>` : text;
  }

  function localName(iri) {
    for (const separator of ["#", "/", ":"]) {
      const trimmed = iri.replace(new RegExp(`\\${separator}+$`), "");
      const at = trimmed.lastIndexOf(separator);
      if (at >= 0 && at < trimmed.length - 1) return trimmed.slice(at + 1);
    }
    return iri;
  }

  function edgeKey(edge) {
    return `${key(edge.s)} ${key(edge.p)} ${key(edge.o)}`;
  }

  /** Triples indexed by subject and predicate, from any number of steps. */
  class Index {
    constructor() {
      this.out = new Map();
      this.in = new Map();
    }

    add(triples) {
      for (const triple of triples || []) {
        const forward = `${key(triple.s)}\n${key(triple.p)}`;
        const backward = `${key(triple.o)}\n${key(triple.p)}`;
        if (!this.out.has(forward)) this.out.set(forward, []);
        if (!this.in.has(backward)) this.in.set(backward, []);
        this.out.get(forward).push(triple.o);
        this.in.get(backward).push(triple.s);
      }
      return this;
    }

    objects(subject, predicate) {
      return this.out.get(`${subject}\n${predicate}`) || [];
    }

    subjects(object, predicate) {
      return this.in.get(`${object}\n${predicate}`) || [];
    }

    value(subject, predicate) {
      const found = this.objects(subject, predicate);
      return found.length ? lexical(found[0]) : null;
    }

    name(term) {
      if (term.t === "i") return this.value(term.i, LABEL) || localName(term.i);
      return lexical(term);
    }

    /** Source chains of an edge (a triple term's r): chunk -> page -> document, one per subgraph. */
    chains(edge) {
      const chains = [];
      const wrapped = { t: "r", r: edge };
      for (const subgraph of this.subjects(key(wrapped), TG + "contains")) {
        for (const start of this.objects(key(subgraph), DERIVED)) {
          const chain = [];
          let node = start;
          while (node && !chain.some((n) => n.iri === node.i)) {
            chain.push(this.node(node.i));
            node = this.objects(node.i, DERIVED)[0];
          }
          chains.push(chain);
        }
      }
      return chains;
    }

    node(iri) {
      const type = this.objects(iri, TYPE).map((t) => KINDS[lexical(t)]).find(Boolean) || null;
      const offset = this.value(iri, TG + "charOffset");
      const length = this.value(iri, TG + "charLength");
      return {
        iri, type, label: this.value(iri, LABEL), title: this.value(iri, TITLE),
        offset: offset === null ? null : Number(offset), length: length === null ? null : Number(length),
      };
    }
  }

  function indexOf(node) {
    const tail = node.slice(node.lastIndexOf(":") + 1);
    return /^\d+$/.test(tail) ? Number(tail) : Number.MAX_SAFE_INTEGER;
  }

  /** The trace's view from the index: ids of the retrieval and selection entities are found by type of link. */
  function view(index) {
    const retrievals = [...index.out.keys()].filter((k) => k.endsWith(`\n${TG}edgeCount`)).map((k) => k.split("\n")[0]);
    const selections = [...index.out.keys()].filter((k) => k.endsWith(`\n${TG}selectedEdge`))
      .map((k) => k.split("\n")[0]);
    const retrieval = retrievals[0] || null;
    const selection = selections[0] || null;
    const retrieved = retrieval ? index.objects(retrieval, TG + "retrievedEdge").filter((t) => t.t === "r")
      .map((t) => t.r) : [];
    const seeds = retrieval ? index.objects(retrieval, TG + "seed").map(lexical) : [];
    const nodes = selection ? index.objects(selection, TG + "selectedEdge").map(lexical) : [];
    nodes.sort((a, b) => indexOf(a) - indexOf(b));
    const selected = nodes.map((node, position) => {
      const edge = index.objects(node, TG + "edge").find((t) => t.t === "r");
      return {
        node, number: position + 1, edge: edge ? edge.r : null,
        reasoning: index.value(node, TG + "reasoning"), selectedBy: index.value(node, TG + "selectedBy"),
        sources: edge ? index.chains(edge.r) : [],
      };
    }).filter((s) => s.edge);
    const count = retrieval ? index.value(retrieval, TG + "edgeCount") : null;
    return {
      retrieval, selection, retrieved, seeds, selected,
      edgeCount: count === null ? null : Number(count),
      fallbackReason: selection ? index.value(selection, TG + "fallbackReason") : null,
      cutEdges: selection ? Number(index.value(selection, TG + "cutEdges") || 0) : 0,
      name: (term) => index.name(term),
    };
  }

  function chainName(node) {
    const preferred = node.type === "Document" ? [node.title, node.label] : [node.label, node.title];
    const name = preferred.find(Boolean) || node.iri;
    const recorded = typeof node.offset === "number" && typeof node.length === "number";  // /api/explain's nodes may lack them
    const span = recorded ? ` (chars ${node.offset}-${node.offset + node.length})` : "";
    return name + span;
  }

  return { Index, view, key, lexical, ntriples, localName, edgeKey, chainName };
})();
