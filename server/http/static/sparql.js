/* SPARQL console: runs the editor's query against /sparql, shows rows, errors with their
   position, download links per format, a shareable URL and a history in localStorage. */
"use strict";

(() => {
  const form = document.getElementById("sparql-form");
  const editor = document.getElementById("query");
  const status = document.getElementById("status");
  const share = document.getElementById("share");
  const area = document.getElementById("result-area");
  const title = document.getElementById("result-title");
  const downloads = document.getElementById("downloads");
  const errorBox = document.getElementById("error");
  const results = document.getElementById("results");
  const historyList = document.getElementById("history");
  const HISTORY_KEY = "glassgraph.sparql.history";
  const HISTORY_MAX = 30;
  const SHOWN_ROWS = 1000;  // more rows than this are for the downloads, not the page
  const RESULT_FORMATS = [  // [label, the endpoint's ?format= name, file extension]
    ["JSON", "json", "srj"],
    ["XML", "xml", "srx"],
    ["CSV", "csv", "csv"],
    ["TSV", "tsv", "tsv"],
  ];
  const GRAPH_FORMATS = [
    ["Turtle", "ttl", "ttl"],
    ["N-Triples", "nt", "nt"],
    ["N-Quads", "nq", "nq"],
    ["RDF/XML", "rdf", "rdf"],
  ];

  GlassTerms.setPrefixes(JSON.parse(document.getElementById("prefixes").textContent));

  /** The query form (SELECT, ASK, CONSTRUCT, DESCRIBE) after the prologue and comments. */
  function queryForm(query) {
    let rest = query;
    for (;;) {
      rest = rest.trimStart();
      const skip = rest.match(/^(#[^\n]*|PREFIX\s+[^\s:]*:\s*<[^>]*>|BASE\s*<[^>]*>)/i);
      if (!skip) break;
      rest = rest.slice(skip[0].length);
    }
    const keyword = rest.match(/^(SELECT|ASK|CONSTRUCT|DESCRIBE)\b/i);
    return keyword ? keyword[1].toUpperCase() : "SELECT";
  }

  function shareUrl(query) {
    return `${location.pathname}?query=${encodeURIComponent(query)}`;
  }

  function updateShare() {
    share.href = shareUrl(editor.value);
  }

  function setStatus(text) {
    status.textContent = text;
  }

  /** One link per format: the GET URL with ?format= (a plain link works too; download.js shows failures). */
  function showDownloads(query, kind) {
    downloads.replaceChildren("Download: ");
    const formats = kind === "CONSTRUCT" || kind === "DESCRIBE" ? GRAPH_FORMATS
      : kind === "ASK" ? RESULT_FORMATS.slice(0, 2) : RESULT_FORMATS;
    formats.forEach(([label, format, extension], index) => {
      const link = document.createElement("a");
      link.href = `/sparql?query=${encodeURIComponent(query)}&format=${format}`;
      link.textContent = label;
      link.download = `results.${extension}`;
      if (index) downloads.append(" · ");
      downloads.append(link);
    });
  }

  /** Shows an error; a "line:column" position in it selects that spot in the editor. */
  function showError(text) {
    const message = GlassDownload.errorMessage(text).trim() || "The query failed.";
    errorBox.replaceChildren();
    const head = document.createElement("p");
    head.className = "error-message";
    head.textContent = message;
    errorBox.append(head);
    const where = message.match(/\bat (\d+):(\d+)/) || message.match(/\b(\d+):(\d+)\b/);
    if (where) {
      const line = Number(where[1]);
      const column = Number(where[2]);
      const lines = editor.value.split("\n");
      if (line >= 1 && line <= lines.length) {
        const pre = document.createElement("pre");
        pre.className = "error-position";
        pre.textContent = `line ${line}, column ${column}:\n${lines[line - 1]}\n${" ".repeat(Math.max(column - 1, 0))}^`;
        errorBox.append(pre);
        const offset = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0) + Math.max(column - 1, 0);
        editor.focus();
        editor.setSelectionRange(offset, Math.min(offset + 1, editor.value.length));
      }
    }
    errorBox.hidden = false;
    results.replaceChildren();
    title.textContent = "Error";
  }

  function table(data) {
    const vars = data.head.vars || [];
    const rows = data.results.bindings;
    const tableNode = document.createElement("table");
    tableNode.className = "data results";
    const headRow = tableNode.createTHead().insertRow();
    for (const name of vars) {
      const th = document.createElement("th");
      th.textContent = `?${name}`;
      headRow.append(th);
    }
    const body = tableNode.createTBody();
    for (const binding of rows.slice(0, SHOWN_ROWS)) {
      const row = body.insertRow();
      for (const name of vars) {
        const cell = row.insertCell();
        if (binding[name]) cell.append(GlassTerms.render(binding[name]));
      }
    }
    return tableNode;
  }

  function showResult(kind, contentType, text, elapsed) {
    results.replaceChildren();
    if (contentType.includes("sparql-results+json")) {
      const data = JSON.parse(text);
      if (typeof data.boolean === "boolean") {
        title.textContent = "Answer";
        const answer = document.createElement("p");
        answer.className = "boolean";
        answer.textContent = String(data.boolean);
        results.append(answer);
        setStatus(`ASK answered in ${elapsed} ms`);
        return 1;
      }
      const count = data.results.bindings.length;
      title.textContent = `${count} ${count === 1 ? "row" : "rows"}`;
      results.append(table(data));
      if (count > SHOWN_ROWS) {
        const note = document.createElement("p");
        note.className = "muted small";
        note.textContent = `Showing the first ${SHOWN_ROWS} rows; the downloads hold all ${count}.`;
        results.append(note);
      }
      setStatus(`${count} ${count === 1 ? "row" : "rows"} in ${elapsed} ms`);
      return count;
    }
    const pre = document.createElement("pre");
    pre.className = "graph-text";
    pre.textContent = text;
    results.append(pre);
    const count = text.split("\n").filter((l) => l.trim() && !l.startsWith("@prefix")).length;
    title.textContent = `${kind} result`;
    setStatus(`${count} lines in ${elapsed} ms`);
    return count;
  }

  async function run() {
    const query = editor.value;
    const kind = queryForm(query);
    const accept = kind === "CONSTRUCT" || kind === "DESCRIBE" ? "text/turtle" : "application/sparql-results+json";
    area.hidden = false;
    errorBox.hidden = true;
    setStatus("Running…");
    showDownloads(query, kind);
    history.replaceState(null, "", shareUrl(query));
    updateShare();
    const started = performance.now();
    let response;
    let text;
    try {
      response = await fetch("/sparql", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: accept },
        body: new URLSearchParams({ query }),
      });
      text = await response.text();
    } catch (failure) {
      setStatus("");
      showError(`Cannot reach the server: ${failure.message}`);
      return;
    }
    const elapsed = Math.round(performance.now() - started);
    if (!response.ok) {
      setStatus(`Error ${response.status}`);
      showError(text);
      return;
    }
    const count = showResult(kind, response.headers.get("Content-Type") || "", text, elapsed);
    remember(query, count);
  }

  function loadHistory() {
    try {
      const items = JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]");
      return Array.isArray(items) ? items : [];
    } catch (ignored) {
      return [];
    }
  }

  function remember(query, count) {
    const items = loadHistory().filter((item) => item.query !== query);
    items.unshift({ query, count, at: new Date().toISOString() });
    try {
      localStorage.setItem(HISTORY_KEY, JSON.stringify(items.slice(0, HISTORY_MAX)));
    } catch (ignored) { /* storage full or disabled: history is a convenience */ }
    renderHistory();
  }

  /** The first line of a query that is not prologue, to name it in the history. */
  function summary(query) {
    const line = query.split("\n").map((l) => l.trim()).find((l) => l && !/^(PREFIX|BASE|#)/i.test(l));
    return line || query.trim().slice(0, 80);
  }

  function renderHistory() {
    historyList.replaceChildren();
    for (const item of loadHistory()) {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "linklike";
      button.textContent = summary(item.query);
      button.title = item.query;
      button.addEventListener("click", () => {
        editor.value = item.query;
        updateShare();
        editor.focus();
      });
      const meta = document.createElement("span");
      meta.className = "muted";
      meta.textContent = ` ${new Date(item.at).toLocaleString()} · ${item.count} ${item.count === 1 ? "row" : "rows"}`;
      li.append(button, meta);
      historyList.append(li);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  editor.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      event.preventDefault();
      run();
    }
  });
  editor.addEventListener("input", updateShare);
  document.getElementById("clear-history").addEventListener("click", () => {
    localStorage.removeItem(HISTORY_KEY);
    renderHistory();
  });

  renderHistory();
  updateShare();
  if (editor.dataset.autorun === "true") run();
})();
