/* Ask: POSTs the question to /api/graph-rag and reads the Server-Sent Events stream with fetch.
   Each explain event gets a row whose content the server renders (/console/trace/part);
   answer chunks are appended as they arrive; the end links to the trace page. */
"use strict";

(() => {
  const form = document.getElementById("ask-form");
  const input = document.getElementById("question");
  const button = document.getElementById("ask-button");
  const live = document.getElementById("live");
  const events = document.getElementById("events");
  const answer = document.getElementById("answer");
  const errorBox = document.getElementById("ask-error");
  const traceLink = document.getElementById("trace-link");
  const HEADINGS = {  // by the explain message's explain_kind: no IRI is parsed here
    session: "Session started",
    retrieval: "Edges retrieved",
    selection: "Edges selected",
    answer: "Answer recorded",
  };
  let sessionIri = null;

  function numberOf(id) {
    const value = Number(document.getElementById(id).value);
    return Number.isFinite(value) && value > 0 ? value : undefined;
  }

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = false;
  }

  async function explain(message) {
    const iri = message.explain_id || "";
    const kind = Object.hasOwn(HEADINGS, message.explain_kind || "") ? message.explain_kind : "other";
    const heading = HEADINGS[kind] || "Explain event";
    if (kind === "session") sessionIri = iri;
    const item = document.createElement("li");
    item.className = `event event-${kind}`;
    item.dataset.iri = iri;
    const title = document.createElement("h3");
    title.textContent = heading;
    const detail = document.createElement("p");
    detail.className = "muted";
    detail.textContent = iri;
    item.append(title, detail);
    events.append(item);
    if (kind === "other") return;
    try {
      const response = await fetch(`/console/trace/part?id=${encodeURIComponent(iri)}`, { headers: { Accept: "text/html" } });
      if (response.ok) {
        item.innerHTML = await response.text();  // rendered and escaped by the server's templates
        item.classList.add("loaded");
      }
    } catch (ignored) { /* the row keeps the IRI */ }
  }

  function handle(message) {
    if (message.message_type === "explain") {
      explain(message);
    } else if (message.response) {
      answer.textContent += message.response;
    }
    if (message.error) showError(`${message.error.type}: ${message.error.message}`);
    if (message.outcome === "no-answer") answer.classList.add("no-answer");
    if (message.end_of_session) finish();
  }

  function finish() {
    button.disabled = false;
    live.classList.remove("streaming");
    if (sessionIri) {
      traceLink.querySelector("a").href = `/console/trace?id=${encodeURIComponent(sessionIri)}`;
      traceLink.hidden = false;
    }
  }

  /** Feeds each complete SSE event ("data:" lines up to a blank line) to handle(). */
  function consume(buffer) {
    const blocks = buffer.split(/\r?\n\r?\n/);
    const rest = blocks.pop();
    for (const block of blocks) {
      const data = block.split(/\r?\n/).filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
      if (data) handle(JSON.parse(data));
    }
    return rest;
  }

  async function ask(question) {
    sessionIri = null;
    events.replaceChildren();
    answer.textContent = "";
    answer.classList.remove("no-answer");
    errorBox.hidden = true;
    traceLink.hidden = true;
    live.hidden = false;
    live.classList.add("streaming");
    button.disabled = true;
    const url = new URL(location.href);
    url.searchParams.set("q", question);
    history.replaceState(null, "", url);
    const body = {
      query: question,
      collection: document.getElementById("collection").value,
      explainable: true,
      streaming: true,
      entity_limit: numberOf("entity_limit"),
      triple_limit: numberOf("triple_limit"),
      max_subgraph_size: numberOf("max_subgraph_size"),
      max_path_length: numberOf("max_path_length"),
    };
    try {
      const response = await fetch("/api/graph-rag", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body),
      });
      if (!response.ok || !response.body) {
        showError(`Error ${response.status}: ${GlassDownload.errorMessage(await response.text())}`);
        finish();
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = consume(buffer + decoder.decode(value, { stream: true }));
      }
      consume(buffer + decoder.decode() + "\n\n");
    } catch (failure) {
      showError(`The stream broke: ${failure.message}`);
    }
    finish();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const question = input.value.trim();
    if (question) ask(question);
  });
  for (const chip of document.querySelectorAll("[data-question]")) {
    chip.addEventListener("click", () => {
      input.value = chip.dataset.question;
      ask(chip.dataset.question);
    });
  }
  if (input.value.trim()) ask(input.value.trim());
})();
