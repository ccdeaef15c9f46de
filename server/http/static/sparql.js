/* SPARQL console: runs the editor's query against /sparql and shows the answer (a paged, sortable,
   filterable table, an ASK's boolean or a graph's text; the raw response a tab away), errors as the
   server's sentence with the line marked, download links per format after a success, a shareable URL
   for queries that fit in one, and a history in localStorage. */
"use strict";

(() => {
  const form = document.getElementById("sparql-form");
  const textarea = document.getElementById("query");
  const checkLine = document.getElementById("check");
  const status = document.getElementById("status");
  const share = document.getElementById("share");
  const area = document.getElementById("result-area");
  const title = document.getElementById("result-title");
  const downloads = document.getElementById("downloads");
  const errorBox = document.getElementById("error");
  const views = document.getElementById("result-views");
  const results = document.getElementById("results");
  const raw = document.getElementById("raw-view");
  const tabs = { table: document.getElementById("tab-table"), raw: document.getElementById("tab-raw") };
  const historyList = document.getElementById("history");
  const HISTORY_KEY = "glassgraph.sparql.history";
  const HISTORY_MAX = 30;
  const URL_MAX = 2000;  // longer addresses break reloads and downloads (~8 KB in servers and proxies)
  const STORED_KEY = "glassgraph.sparql.stored";  // a query too long for the address, kept in this tab
  const STORED_HASH = "#stored-query";
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

  const prefixes = JSON.parse(document.getElementById("prefixes").textContent);
  GlassTerms.setPrefixes(prefixes);
  const table = GlassResults.create({
    container: results,
    tools: document.getElementById("table-tools"),
    filter: document.getElementById("filter"),
    previous: document.getElementById("prev-page"),
    next: document.getElementById("next-page"),
    info: document.getElementById("page-info"),
  });
  const editor = GlassEditor.create(textarea, {
    prefixes,
    onRun: () => run(),
    onChange: () => updateShare(),
    onCheck: (problem) => { checkLine.textContent = problem ? problem.sentence : ""; },
  });

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

  /** The address that runs ``query`` again, or null when it would be too long for one. */
  function shareUrl(query) {
    const url = `${location.pathname}?query=${encodeURIComponent(query)}`;
    return url.length <= URL_MAX ? url : null;
  }

  function updateShare() {
    const url = shareUrl(editor.value);
    share.hidden = url === null;
    if (url !== null) share.href = url;
  }

  function setStatus(text) {
    status.textContent = text;
  }

  /** One link per format. A query that fits in an address is in the link (it works without scripts);
      a longer one goes in the body of a POST (data-query, read by download.js). */
  function showDownloads(query, kind) {
    downloads.replaceChildren("Download: ");
    const formats = kind === "CONSTRUCT" || kind === "DESCRIBE" ? GRAPH_FORMATS
      : kind === "ASK" ? RESULT_FORMATS.slice(0, 2) : RESULT_FORMATS;
    const inAddress = shareUrl(query) !== null;
    formats.forEach(([label, format, extension], index) => {
      const link = document.createElement("a");
      link.href = inAddress ? `/sparql?query=${encodeURIComponent(query)}&format=${format}` : `/sparql?format=${format}`;
      if (!inAddress) link.dataset.query = query;
      link.textContent = label;
      link.download = `results.${extension}`;
      if (index) downloads.append(" · ");
      downloads.append(link);
    });
    downloads.hidden = false;
  }

  function showView(name) {
    for (const [key, tab] of Object.entries(tabs)) tab.setAttribute("aria-selected", String(key === name));
    results.hidden = name !== "table";
    raw.hidden = name !== "raw";
  }

  /** Shows the server's message; a "line L, column C" in it is shown under the line and selected in the editor. */
  function showError(text) {
    const message = GlassDownload.errorMessage(text).trim() || "The query failed.";
    errorBox.replaceChildren();
    const head = document.createElement("p");
    head.className = "error-message";
    head.textContent = message;
    errorBox.append(head);
    const where = message.match(/\bline (\d+), column (\d+)/);
    if (where) {
      const line = Number(where[1]);
      const column = Number(where[2]);
      const source = editor.lineText(line);
      if (source !== null) {
        const pre = document.createElement("pre");
        pre.className = "error-position";
        const before = Array.from(source).slice(0, Math.max(column - 1, 0)).length;
        pre.textContent = `line ${line}, column ${column}:\n${source}\n${" ".repeat(before)}^`;
        errorBox.append(pre);
        editor.select(line, column);
      }
    }
    errorBox.hidden = false;
    downloads.hidden = true;
    views.hidden = true;
    showView("table");
    results.replaceChildren();
    raw.textContent = "";
    table.hide();
    title.textContent = "Error";
  }

  function showResult(kind, contentType, text, elapsed) {
    results.replaceChildren();
    table.hide();
    views.hidden = false;
    if (contentType.includes("sparql-results+json")) {
      const data = JSON.parse(text);
      raw.textContent = JSON.stringify(data, null, 2);
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
      title.textContent = `${count.toLocaleString()} ${count === 1 ? "row" : "rows"}`;
      table.show(data);
      setStatus(`${count.toLocaleString()} ${count === 1 ? "row" : "rows"} in ${elapsed} ms`);
      return count;
    }
    raw.textContent = text;  // N-Triples: one triple a line, shown as a table of subject, predicate, object
    const data = GlassNTriples.parse(text);
    const count = data.results.bindings.length;
    title.textContent = `${count.toLocaleString()} ${count === 1 ? "triple" : "triples"}`;
    table.show(data);
    setStatus(`${kind}: ${count.toLocaleString()} ${count === 1 ? "triple" : "triples"} in ${elapsed} ms`);
    return count;
  }

  /** The address shows the query when it fits; a longer one is kept in this tab for a reload. */
  function rememberInAddress(query) {
    const url = shareUrl(query);
    if (url !== null) {
      sessionStorage.removeItem(STORED_KEY);
      history.replaceState(null, "", url);
      return;
    }
    try {
      sessionStorage.setItem(STORED_KEY, query);
      history.replaceState(null, "", location.pathname + STORED_HASH);
    } catch (ignored) {  /* storage full or disabled: a reload shows the default query */
      history.replaceState(null, "", location.pathname);
    }
  }

  async function run() {
    const query = editor.value;
    editor.checkNow();
    const kind = queryForm(query);
    const accept = kind === "CONSTRUCT" || kind === "DESCRIBE" ? "application/n-triples"
      : "application/sparql-results+json";
    area.hidden = false;
    errorBox.hidden = true;
    downloads.hidden = true;
    setStatus("Running…");
    rememberInAddress(query);
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
    showDownloads(query, kind);
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
      button.title = item.query.slice(0, 2000);
      button.addEventListener("click", () => {
        editor.value = item.query;
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
  tabs.table.addEventListener("click", () => showView("table"));
  tabs.raw.addEventListener("click", () => showView("raw"));
  document.getElementById("clear-history").addEventListener("click", () => {
    localStorage.removeItem(HISTORY_KEY);
    renderHistory();
  });

  renderHistory();
  const stored = location.hash === STORED_HASH ? sessionStorage.getItem(STORED_KEY) : null;
  if (stored !== null) editor.value = stored;
  updateShare();
  if (textarea.dataset.autorun === "true" || stored !== null) run();
})();
