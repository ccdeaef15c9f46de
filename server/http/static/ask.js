/* Ask: POSTs the question to /api/graph-rag (or, in Documents mode, ?mode=documents, to /api/document-rag)
   and reads the Server-Sent Events stream with fetch.
   Each step has a placeholder ("Retrieving…") with its running time until its explain event arrives; the
   event's explain_triples fill it in (GlassExplain, GlassSteps: no second request per step) and, once the
   edges are selected, draw the graph (GlassGraph). The answer sits on top, its [n] marks linked to the
   edges; Stop aborts the request (the server records the session as cancelled). A document RAG answer's
   passages and cited sentences are read back from its trace once it is recorded (the stream names their
   chunks, not their documents and text): the passages in the retrieval step, the sentences under the answer
   with their marks linked to them. */
"use strict";

(() => {
  const form = document.getElementById("ask-form");
  const input = document.getElementById("question");
  const button = document.getElementById("ask-button");
  const stop = document.getElementById("stop-button");
  const live = document.getElementById("live");
  const events = document.getElementById("events");
  const answerCard = document.getElementById("answer-card");
  const answer = document.getElementById("answer");
  const status = document.getElementById("answer-status");
  const errorBox = document.getElementById("ask-error");
  const traceLink = document.getElementById("trace-link");
  const askedBefore = document.getElementById("asked-before");
  const traceUrl = (session) => `/console/trace?id=${encodeURIComponent(session)}`;
  const graphCard = document.getElementById("graph-card");
  const panel = document.getElementById("ask-graph-panel");
  const title = document.getElementById("ask-title");
  const cited = document.getElementById("cited-box");
  const TG = "https://trustgraph.ai/ns/";
  // The stages as declared (server/stages.py), in order, found by the explain message's explain_kind (no IRI is
  // parsed here): each one's titles while it runs and once recorded (``passages``: in Documents mode).
  const STEPS = JSON.parse(document.getElementById("explain-stages").textContent);
  const [SESSION, RETRIEVAL, SELECTION, ANSWER] = STEPS.map((step) => step.kind);
  let run = null;  // the question in progress: its controller, steps, index and timer

  function documentsMode() {
    return document.querySelector('input[name="mode"]:checked').value === "documents";
  }

  /** The mode's fields, title and address (?mode=documents, so that a link reproduces it). */
  function showMode() {
    const documents = documentsMode();
    for (const field of document.querySelectorAll("[data-mode]")) {
      field.hidden = (field.dataset.mode === "documents") !== documents;
    }
    title.textContent = documents ? "Ask the documents" : "Ask the graph";
    const url = new URL(location.href);
    if (documents) url.searchParams.set("mode", "documents");
    else url.searchParams.delete("mode");
    history.replaceState(null, "", url);
  }

  function numberOf(id) {
    const value = Number(document.getElementById(id).value);
    return Number.isFinite(value) && value > 0 ? value : undefined;
  }

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = false;
  }

  function setStatus(outcome) {
    status.textContent = outcome;
    status.className = `badge badge-${outcome}`;
    status.hidden = false;
    live.dataset.outcome = outcome;
  }

  /** One placeholder per step: heading, state and the step's time. */
  function placeholders() {
    return STEPS.map((step) => {
      const item = GlassSteps.el("li", `event event-${step.kind} pending`);
      item.dataset.step = step.kind;
      const head = GlassSteps.el("h3");
      const title = GlassSteps.el("span", "step-title", step.running);
      const time = GlassSteps.el("span", "step-time muted small");
      head.append(title, " ", time);
      const body = GlassSteps.el("div", "step-body");
      item.append(head, body);
      events.append(item);
      return { ...step, item, title, time, body, started: null };
    });
  }

  function start(step) {
    step.started = performance.now();
    step.item.classList.replace("pending", "running");
  }

  function tick() {
    for (const step of run.steps) {
      if (step.item.classList.contains("running")) step.time.textContent = `${Math.round(performance.now() - step.started)} ms`;
    }
  }

  function explain(message) {
    const step = run.steps.find((s) => s.kind === message.explain_kind);
    if (!step) return;
    run.index.add(message.explain_triples);
    const view = GlassExplain.view(run.index);
    step.time.textContent = `${Math.round(performance.now() - step.started)} ms`;
    step.item.classList.replace("running", "done");
    step.item.classList.add("loaded");
    step.item.dataset.iri = message.explain_id || "";
    step.title.textContent = (run.documents && step.passages) || step.done;
    if (run.documents && (step.kind === RETRIEVAL || step.kind === SELECTION)) {
      step.body.append(passageStep(step.kind, message.explain_id));
    } else if (step.kind === SESSION) {
      run.session = message.explain_id;
      live.dataset.session = message.explain_id;
      step.body.append(GlassSteps.link(`/console/trace?id=${encodeURIComponent(message.explain_id)}`, message.explain_id));
    } else if (step.kind === RETRIEVAL) {
      step.body.append(GlassSteps.retrieval(view));
    } else if (step.kind === SELECTION) {
      step.body.append(GlassSteps.selection(view));
      run.selected = view.selected.length;
      graphCard.hidden = false;
      GlassGraph.draw(document.getElementById("ask-graph"), view, panel);
    } else if (step.kind === ANSWER) {
      if (run.index.value(message.explain_id, "https://trustgraph.ai/ns/outcome") === "no-answer") {
        const outcome = GlassSteps.el("p", "outcome");
        outcome.append(GlassSteps.el("span", "badge badge-no-answer", "no-answer"),
          ` The ${run.documents ? "documents do" : "knowledge graph does"} not answer this question.`);
        step.body.append(outcome);
      }
      for (const sentence of run.index.objects(message.explain_id, "https://trustgraph.ai/ns/unsupported").map((t) => t.v)) {
        const flagged = GlassSteps.el("p", "unsupported");
        flagged.append(GlassSteps.el("span", "badge badge-unsupported", "unsupported"), ` ${sentence}`);
        step.body.append(flagged);
      }
      const fallback = run.index.value(message.explain_id, "https://trustgraph.ai/ns/answerFallback");
      if (fallback) step.body.append(GlassSteps.el("p", "fallback", `Answer fallback: ${fallback}`));
      step.body.append(GlassSteps.el("p", "muted", "The answer text is stored with the trace."));
    }
    const next = run.steps[run.steps.indexOf(step) + 1];
    if (next) start(next);
  }

  /** A document RAG step from its triples: the passages retrieved with the query terms, or those used. */
  function passageStep(kind, id) {
    if (kind === RETRIEVAL) {
      const terms = run.index.objects(id, `${TG}queryTerm`).map(GlassExplain.lexical).sort();
      return GlassSteps.passageCount(Number(run.index.value(id, `${TG}passageCount`) || 0), "retrieved", terms);
    }
    run.selected = run.index.objects(id, `${TG}selectedPassage`).length;
    const method = run.index.value(id, `${TG}selectionMethod`);
    return GlassSteps.passageCount(run.selected, `used for the answer${method ? ` (${method})` : ""}`, []);
  }

  /** The recorded passages (in the retrieval step) and cited sentences (under the answer) of a document RAG
      answer, read back from its trace. */
  async function showPassages(current) {
    try {
      const response = await fetch(`/api/explain?id=${encodeURIComponent(current.session)}`, {
        headers: { Accept: "application/json" }, signal: current.controller.signal });
      if (!response.ok) {
        const reason = GlassDownload.errorMessage(await response.text());
        showError(`The passages could not be read: error ${response.status}: ${reason}`);
        return;
      }
      const trace = await response.json();
      current.steps.find((step) => step.kind === RETRIEVAL).body.append(GlassSteps.passages(trace.passages));
      if (trace.spans.length) {
        cited.querySelector("ol").replaceWith(GlassSteps.citedSpans(trace.spans));
        cited.hidden = false;
      }
    } catch (failure) {
      if (failure.name !== "AbortError") showError(`The passages could not be read: ${failure.message}`);
    }
  }

  function handle(message) {
    if (message.message_type === "explain") {
      explain(message);
    } else if (message.response) {
      if (!answer.textContent) answerCard.scrollIntoView({ block: "start" });
      answer.textContent += message.response;
    }
    if (message.error) {
      showError(`${message.error.type}: ${message.error.message}`);
      run.outcome = "failed";
    }
    if (message.outcome) run.outcome = message.outcome;
  }

  function focusEdge(number) {
    GlassGraph.focus("ask-graph", number, panel);
    const item = document.getElementById(`edge-${number}`);
    if (item) item.classList.add("focused");
  }

  function finish() {
    clearInterval(run.timer);
    button.disabled = false;
    stop.hidden = true;
    live.classList.remove("streaming");
    for (const step of run.steps) {
      if (!step.item.classList.contains("done")) {
        step.item.classList.remove("pending", "running");
        step.item.classList.add("stopped");
        step.title.textContent = `${step.running.replace("…", "")}: stopped`;
      }
    }
    const outcome = run.outcome || "failed";
    setStatus(outcome);
    answer.classList.toggle("no-answer", outcome === "no-answer");
    if (outcome === "answered") {
      if (run.documents) GlassSteps.markAnswer(answer, run.selected, GlassSteps.focusCited, "cited");
      else GlassSteps.markAnswer(answer, run.selected || 0, focusEdge);
    }
    if (run.session) {
      traceLink.querySelector("a").href = traceUrl(run.session);
      traceLink.hidden = false;
      const url = new URL(location.href);  // Back to this page shows this answer's trace, not a new question
      url.searchParams.set("session", run.session);
      history.replaceState(null, "", url);
    }
    answerCard.scrollIntoView({ block: "start" });
    live.dataset.done = "true";
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
    if (run) {
      run.controller.abort();
      clearInterval(run.timer);
    }
    events.replaceChildren();
    answer.textContent = "";
    answer.classList.remove("no-answer");
    status.hidden = true;
    errorBox.hidden = true;
    traceLink.hidden = true;
    graphCard.hidden = true;
    cited.hidden = true;
    live.hidden = false;
    delete live.dataset.done;
    delete live.dataset.session;
    delete live.dataset.outcome;
    live.classList.add("streaming");
    button.disabled = true;
    stop.hidden = false;
    run = { controller: new AbortController(), steps: placeholders(), index: new GlassExplain.Index(),
            session: null, outcome: null, selected: 0, documents: documentsMode() };
    run.timer = setInterval(tick, 100);
    start(run.steps[0]);
    const url = new URL(location.href);
    url.searchParams.set("q", question);
    url.searchParams.set("collection", document.getElementById("collection").value);  // a link asks the same
    url.searchParams.delete("session");
    history.replaceState(null, "", url);
    askedBefore.hidden = true;
    const body = {
      query: question,
      collection: document.getElementById("collection").value,
      explainable: true,
      streaming: true,
      ...(run.documents ? { passages: numberOf("passage_limit") } : {
        entity_limit: numberOf("entity_limit"),
        triple_limit: numberOf("triple_limit"),
        max_subgraph_size: numberOf("max_subgraph_size"),
        max_path_length: numberOf("max_path_length"),
      }),
    };
    const current = run;
    try {
      const response = await fetch(current.documents ? "/api/document-rag" : "/api/graph-rag", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body),
        signal: current.controller.signal,
      });
      if (!response.ok || !response.body) {
        showError(`Error ${response.status}: ${GlassDownload.errorMessage(await response.text())}`);
      } else {
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer = consume(buffer + decoder.decode(value, { stream: true }));
        }
        consume(buffer + decoder.decode() + "\n\n");
      }
    } catch (failure) {
      if (failure.name === "AbortError") {
        current.outcome = "cancelled";
      } else {
        showError(`The stream broke: ${failure.message}`);
      }
    }
    const retrieved = current.steps.find((step) => step.kind === RETRIEVAL).item.classList.contains("done");
    if (run === current && current.documents && retrieved) await showPassages(current);
    if (run === current) finish();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const question = input.value.trim();
    if (question) ask(question);
  });
  for (const radio of document.querySelectorAll('input[name="mode"]')) radio.addEventListener("change", showMode);
  showMode();  // a page restored with another choice than its address
  stop.addEventListener("click", () => {
    if (run) run.controller.abort();
  });
  for (const chip of document.querySelectorAll("[data-question]")) {
    chip.addEventListener("click", () => {
      input.value = chip.dataset.question;
      ask(chip.dataset.question);
    });
  }
  // A shared link (?q=) asks at once; coming back to an answer (?session=, or Back and Forward) shows a
  // link to its recorded trace instead of asking again and recording a second session.
  const asked = new URL(location.href).searchParams.get("session");
  const returning = performance.getEntriesByType("navigation")[0]?.type === "back_forward";
  if (asked) {
    askedBefore.querySelector("a").href = traceUrl(asked);
    askedBefore.hidden = false;
  } else if (input.value.trim() && !returning) {
    ask(input.value.trim());
  }
})();
