/* The SPARQL console's editor: CodeMirror 6 (vendor/codemirror6, see its BUILD.md) with SPARQL
   highlighting, completion of keywords, prefixes and predicates (a prefix the query does not declare
   gets its PREFIX line), and error marks from the server's own parser (POST /api/sparql/check) a
   moment after typing stops. The textarea it replaces stays in the form, hidden and kept in step.
   The editor lives in a shadow root: CodeMirror styles a document with a <style> element, which the
   Content-Security-Policy refuses, and a shadow root with a constructed style sheet, which it allows. */
"use strict";

const GlassEditor = (() => {
  const CM = CodeMirror6;
  const CHECK_DELAY_MS = 400;
  const KEYWORDS = ["SELECT", "DISTINCT", "REDUCED", "WHERE", "ASK", "CONSTRUCT", "DESCRIBE", "FROM", "NAMED",
    "GRAPH", "OPTIONAL", "UNION", "MINUS", "FILTER", "BIND", "VALUES", "SERVICE", "EXISTS", "NOT", "IN", "AS",
    "ORDER BY", "GROUP BY", "HAVING", "LIMIT", "OFFSET", "ASC", "DESC", "PREFIX", "BASE", "COUNT", "SUM", "MIN",
    "MAX", "AVG", "SAMPLE", "GROUP_CONCAT", "STR", "LANG", "LANGMATCHES", "DATATYPE", "BOUND", "IRI", "CONTAINS",
    "STRSTARTS", "STRENDS", "REGEX", "LCASE", "UCASE", "COALESCE", "IF", "isIRI", "isLiteral", "isBlank",
    "isTRIPLE", "TRIPLE", "SUBJECT", "PREDICATE", "OBJECT", "LATERAL"];
  const THEME = {
    "&": { height: "18rem", border: "1px solid #dde2e8", borderRadius: "6px", background: "#fbfcfd",
           color: "#1c2430", fontSize: "0.9rem" },
    "&.cm-focused": { outline: "2px solid #0b6e75", outlineOffset: "1px" },
    ".cm-scroller": { fontFamily: 'ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace',
                      lineHeight: "1.45" },
    ".cm-gutters": { background: "#f1f4f8", color: "#5b6675", borderRight: "1px solid #dde2e8" },
    ".cm-tooltip": { maxWidth: "min(36rem, 90vw)", fontFamily: "system-ui, sans-serif" },
    ".cm-tooltip-autocomplete ul li[aria-selected]": { background: "#0b6e75", color: "#ffffff" },
    ".cm-completionDetail": { color: "#5b6675", fontStyle: "normal", marginLeft: "0.6rem" },
    // CodeMirror draws lint marks with data: SVG images, which the Content-Security-Policy refuses
    ".cm-lintRange-error": { backgroundImage: "none", textDecoration: "underline wavy #c62828",
                             textDecorationSkipInk: "none", textUnderlineOffset: "3px" },
    ".cm-lintRange-warning, .cm-lintRange-info, .cm-lintRange-hint": { backgroundImage: "none",
                                                                       textDecoration: "underline wavy #9a6200" },
    ".cm-lint-marker": { content: "normal", width: "0.7em", height: "0.7em", margin: "0.35em 0.15em",
                         borderRadius: "50%" },
    ".cm-lint-marker-error": { background: "#c62828" },
    ".cm-lint-marker-warning, .cm-lint-marker-info": { background: "#9a6200" },
    "@media (max-width: 760px)": { "&": { height: "14rem", fontSize: "0.85rem" } },
  };
  const PREFIX_DECLARATION = /^\s*PREFIX\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>/gim;

  /** The prefixes the query declares: prefix -> namespace IRI. */
  function declared(text) {
    const found = new Map();
    for (const match of text.matchAll(PREFIX_DECLARATION)) found.set(match[1] || "", match[2]);
    return found;
  }

  /** Where a new PREFIX line goes: after the last PREFIX line of the prologue, else at the top. */
  function prefixLineAt(doc) {
    let at = 0;
    for (let number = 1; number <= doc.lines; number += 1) {
      const line = doc.line(number);
      if (/^\s*PREFIX\s/i.test(line.text)) at = Math.min(line.to + 1, doc.length);
      else if (line.text.trim() && !/^\s*(#|BASE\s)/i.test(line.text)) break;
    }
    return at;
  }

  /** A completion that writes ``label`` and, when ``prefix`` is not declared yet, its PREFIX line. */
  function withPrefix(prefix, namespace, label) {
    return (view, completion, from, to) => {
      const changes = [{ from, to, insert: label }];
      const doc = view.state.doc;
      if (!declared(doc.toString()).has(prefix)) {
        const at = prefixLineAt(doc);
        const newline = at === doc.length && doc.length > 0 && !doc.toString().endsWith("\n") ? "\n" : "";
        changes.push({ from: at, insert: `${newline}PREFIX ${prefix}: <${namespace}>\n` });
      }
      const set = view.state.changes(changes);
      view.dispatch({ changes: set, selection: { anchor: set.mapPos(to, 1) }, userEvent: "input.complete" });
    };
  }

  function create(textarea, { prefixes, onRun, onChange, onCheck }) {
    let predicates = null;  // fetched once, at the first completion that may want them

    function loadPredicates() {
      predicates = predicates || fetch("/api/sparql/predicates")
        .then((response) => (response.ok ? response.json() : { predicates: [] }))
        .then((body) => body.predicates)
        .catch(() => []);
      return predicates;
    }

    /** Known namespaces: the query's own declarations over the server's usual prefixes. */
    function namespaces(text) {
      return new Map([...Object.entries(prefixes), ...declared(text)]);
    }

    async function complete(context) {
      const word = context.matchBefore(/<[^\s<>]*|[A-Za-z_][\w.-]*:?[\w.-]*|:[\w.-]*/);
      if (!word && !context.explicit) return null;
      const from = word ? word.from : context.pos;
      const typed = word ? word.text : "";
      const known = namespaces(context.state.doc.toString());
      const options = [];
      if (!typed.startsWith("<")) {
        if (!typed.includes(":")) {
          for (const keyword of KEYWORDS) options.push({ label: keyword, type: "keyword" });
        }
        for (const [prefix, namespace] of known) {
          options.push({ label: `${prefix}:`, type: "namespace", detail: namespace,
                         apply: withPrefix(prefix, namespace, `${prefix}:`) });
        }
      }
      for (const { iri, triples } of await loadPredicates()) {
        const entry = [...known].find(([, namespace]) => iri.startsWith(namespace) && iri.length > namespace.length
                                                     && /^[\w-]+$/.test(iri.slice(namespace.length)));
        const detail = `predicate · ${triples.toLocaleString()} triples`;
        if (entry && !typed.startsWith("<")) {
          const label = `${entry[0]}:${iri.slice(entry[1].length)}`;
          options.push({ label, type: "property", detail, apply: withPrefix(entry[0], entry[1], label), boost: -1 });
        } else if (!entry || typed.startsWith("<")) {
          options.push({ label: `<${iri}>`, type: "property", detail, boost: -2 });
        }
      }
      return { from, options, validFor: /^[<\w.:/#-]*$/ };
    }

    /** The document range of the parser's line and column (columns count characters, not UTF-16 units). */
    function range(doc, problem) {
      if (problem.line == null) return [0, doc.line(1).to];
      const line = doc.line(Math.min(Math.max(problem.line, 1), doc.lines));
      const before = Array.from(line.text).slice(0, Math.max((problem.column || 1) - 1, 0)).join("");
      const from = line.from + Math.min(before.length, line.length);
      const word = line.text.slice(from - line.from).match(/^[^\s{}()[\],;.]+|^\S/);
      return [from, word ? from + word[0].length : from];
    }

    /** The marks for the current text. ``host.dataset.check`` says "pending" from an edit until the
        check of the latest text is back ("done"). */
    async function check(view) {
      const text = view.state.doc.toString();
      let body;
      try {
        const response = await fetch("/api/sparql/check", {
          method: "POST", headers: { "Content-Type": "application/sparql-query" }, body: text,
        });
        body = response.ok ? await response.json() : null;  // not ok: busy or too costly to check; a run tells
      } catch (ignored) {
        body = null;
      }
      if (view.state.doc.toString() !== text) return [];
      host.dataset.check = "done";
      onCheck(body === null ? null : body.problem);
      if (body === null) return [];
      if (body.valid) return [];
      const [from, to] = range(view.state.doc, body.problem);
      return [{ from, to, severity: "error", source: "parser", message: body.problem.sentence }];
    }

    const host = document.createElement("div");
    host.id = "editor";
    host.className = "sparql-editor";
    host.dataset.check = "pending";
    textarea.before(host);
    textarea.hidden = true;
    const root = host.attachShadow({ mode: "open" });
    const run = () => { onRun(); return true; };
    const view = new CM.EditorView({
      root,
      parent: root,
      doc: textarea.value,
      extensions: [
        CM.Prec.highest(CM.keymap.of([{ key: "Mod-Enter", run }, { key: "Shift-Enter", run }])),
        CM.lineNumbers(), CM.highlightActiveLineGutter(), CM.history(), CM.drawSelection(), CM.indentOnInput(),
        CM.bracketMatching(), CM.closeBrackets(), CM.highlightActiveLine(),
        CM.StreamLanguage.define(CM.sparql), CM.syntaxHighlighting(CM.defaultHighlightStyle),
        CM.autocompletion({ override: [complete], activateOnTyping: true }),
        CM.linter(check, { delay: CHECK_DELAY_MS }), CM.lintGutter(),
        CM.keymap.of([...CM.closeBracketsKeymap, ...CM.defaultKeymap, ...CM.historyKeymap,
                      ...CM.completionKeymap, ...CM.lintKeymap]),
        CM.EditorView.theme(THEME),
        CM.EditorView.contentAttributes.of({ "aria-label": "SPARQL query", spellcheck: "false",
                                             autocapitalize: "off", autocorrect: "off" }),
        CM.EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          host.dataset.check = "pending";
          textarea.value = update.state.doc.toString();
          onChange(textarea.value);
        }),
      ],
    });

    return {
      get value() { return view.state.doc.toString(); },
      set value(text) {
        view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
      },
      focus() { view.focus(); },
      /** Checks now rather than after the pause (a run is about to start). */
      checkNow() { CM.forceLinting(view); },
      /** Puts the cursor on a parser position (line and column from 1) and shows it. */
      select(line, column) {
        const [from, to] = range(view.state.doc, { line, column });
        view.dispatch({ selection: { anchor: from, head: Math.max(to, from) }, scrollIntoView: true });
        view.focus();
      },
      lineText(line) {
        return line >= 1 && line <= view.state.doc.lines ? view.state.doc.line(line).text : null;
      },
    };
  }

  return { create };
})();
