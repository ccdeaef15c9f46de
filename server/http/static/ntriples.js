/* N-Triples (with RDF 1.2 triple terms, <<( s p o )>>) read into the term objects of SPARQL's JSON results, so
   that a CONSTRUCT or DESCRIBE answer shows in the results table: one row per triple, subject, predicate and
   object, sortable and filterable like a SELECT's rows. */
"use strict";

const GlassNTriples = (() => {
  const ESCAPES = { t: "\t", b: "\b", n: "\n", r: "\r", f: "\f", '"': '"', "'": "'", "\\": "\\" };
  const LANGUAGE = /^@([A-Za-z]+(?:-[A-Za-z0-9]+)*)(?:--(ltr|rtl))?/;
  const BLANK = /^_:([^\s()<>"]+)/;

  function unescape(text) {
    return text.replace(/\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))/g,
      (_, u4, u8, other) => (u4 || u8 ? String.fromCodePoint(parseInt(u4 || u8, 16)) : ESCAPES[other] ?? other));
  }

  /** The three terms of one line of N-Triples. */
  function triple(line) {
    let at = 0;
    const fail = () => { throw new Error(`not N-Triples at character ${at + 1}: ${line}`); };
    const blanks = () => { while (line[at] === " " || line[at] === "\t") at += 1; };

    function iri() {
      const end = line.indexOf(">", at);
      if (end < 0) fail();
      const value = unescape(line.slice(at + 1, end));
      at = end + 1;
      return value;
    }

    function literal() {
      let end = at + 1;
      while (end < line.length && line[end] !== '"') end += line[end] === "\\" ? 2 : 1;
      if (end >= line.length) fail();
      const found = { type: "literal", value: unescape(line.slice(at + 1, end)) };
      at = end + 1;
      const language = LANGUAGE.exec(line.slice(at));
      if (language) {
        found["xml:lang"] = language[1];
        at += language[0].length;
      } else if (line.startsWith("^^<", at)) {
        at += 2;
        found.datatype = iri();
      }
      return found;
    }

    function term() {
      blanks();
      if (line.startsWith("<<(", at)) {
        at += 3;
        const value = { subject: term(), predicate: term(), object: term() };
        blanks();
        if (!line.startsWith(")>>", at)) fail();
        at += 3;
        return { type: "triple", value };
      }
      if (line[at] === "<") return { type: "uri", value: iri() };
      if (line[at] === '"') return literal();
      const blank = BLANK.exec(line.slice(at));
      if (!blank) fail();
      at += blank[0].length;
      return { type: "bnode", value: blank[1] };
    }

    const row = { subject: term(), predicate: term(), object: term() };
    blanks();
    if (line[at] !== ".") fail();
    return row;
  }

  /** ``text`` as SPARQL JSON results with the variables subject, predicate and object. */
  function parse(text) {
    const bindings = text.split("\n").filter((line) => line.trim() && !line.trimStart().startsWith("#")).map(triple);
    return { head: { vars: ["subject", "predicate", "object"] }, results: { bindings } };
  }

  return { parse };
})();
