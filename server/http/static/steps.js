/* What the console shows of a trace's steps, built from GlassExplain's view with DOM nodes (no HTML
   strings): the retrieval's seeds and counts, the selected edges with their number, reason, chooser and
   source chains (links to the source viewer), and an answer whose [n] marks link to those edges; for a
   document RAG trace, its passages and cited sentences (links to the source viewer with the sentence
   highlighted), as partials/passages.html shows them on the trace page. */
"use strict";

const GlassSteps = (() => {
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  const CHOSEN_BY = {fallback: "the deterministic selector (fallback)", deterministic: "the deterministic selector"};

  function link(href, text, title) {
    const a = el("a", null, text);
    a.href = href;
    if (title) a.title = title;
    return a;
  }

  function resource(term, name) {
    if (term.t !== "i") return el("span", "literal", name);
    return link(`/resource?iri=${encodeURIComponent(term.i)}`, name, term.i);
  }

  function sourceHref(node, edge) {
    const url = new URL("/console/source", location.href);
    url.searchParams.set("id", node.iri);
    if (edge && node.type === "Chunk") url.searchParams.set("edge", GlassExplain.ntriples({ t: "r", r: edge }));
    return url.pathname + url.search;
  }

  function chain(nodes, edge) {
    const line = el("span", "chain");
    nodes.forEach((node, i) => {
      if (i) line.append(el("span", "arrow", " → "));
      const a = link(sourceHref(node, edge), GlassExplain.chainName(node), `${node.type || "Node"}: ${node.iri}`);
      a.className = `chain-node chain-${(node.type || "node").toLowerCase()}`;
      line.append(a);
    });
    return line;
  }

  /** The retrieval step: how many edges from how many seeds, and the seeds by name. */
  function retrieval(view) {
    const part = el("div");
    const count = el("p");
    count.append(el("strong", "count", String(view.edgeCount ?? view.retrieved.length)),
      ` ${view.edgeCount === 1 ? "edge" : "edges"} retrieved from `,
      el("strong", "seed-count", String(view.seeds.length)), ` ${view.seeds.length === 1 ? "seed" : "seeds"}`);
    part.append(count);
    if (view.seeds.length) {
      const seeds = el("p", "seeds small");
      seeds.append("Seeds: ");
      view.seeds.forEach((iri, i) => {
        if (i) seeds.append(", ");
        seeds.append(resource({ t: "i", i: iri }, view.name({ t: "i", i: iri })));
      });
      part.append(seeds);
    }
    return part;
  }

  /** The selection step: the numbered edges, each with its reason, chooser and source chains. */
  function selection(view) {
    const part = el("div");
    const count = el("p");
    count.append(el("strong", "count", String(view.selected.length)),
      ` ${view.selected.length === 1 ? "edge" : "edges"} selected, with the reason for each`);
    part.append(count);
    if (view.fallbackReason) part.append(el("p", "fallback", `Fallback to the deterministic selector: ${view.fallbackReason}`));
    if (view.cutEdges) part.append(el("p", "cut", `Cut: ${view.cutEdges} more relevant edge(s) left out of the selection`));
    const list = el("ol", "edges");
    for (const choice of view.selected) {
      const item = el("li", "edge");
      item.id = `edge-${choice.number}`;
      item.dataset.number = String(choice.number);
      const triple = el("p", "edge-triple");
      triple.append(el("span", "edge-number", `[${choice.number}] `), resource(choice.edge.s, view.name(choice.edge.s)),
        " ", el("span", "predicate", view.name(choice.edge.p)), " ", resource(choice.edge.o, view.name(choice.edge.o)));
      item.append(triple);
      if (choice.reasoning) item.append(el("p", "reasoning", choice.reasoning));
      if (choice.selectedBy) {
        item.append(el("p", "chosen-by muted small", `Chosen by ${CHOSEN_BY[choice.selectedBy] || "the model"}`));
      }
      const sources = el("ul", "sources");
      for (const nodes of choice.sources) {
        const line = el("li");
        line.append("Source: ", chain(nodes, choice.edge));
        sources.append(line);
      }
      item.append(choice.sources.length ? sources : el("p", "muted small", "No recorded source."));
      list.append(item);
    }
    part.append(list);
    return part;
  }

  /** A document RAG step's counts: "N passages retrieved" and the query terms, or "N passages used". */
  function passageCount(count, text, terms) {
    const part = el("div");
    const line = el("p");
    line.append(el("strong", "count", String(count)), ` ${count === 1 ? "passage" : "passages"} ${text}`);
    part.append(line);
    if (terms.length) part.append(el("p", "query-terms small", `Query terms: ${terms.join(", ")}`));
    return part;
  }

  /** A score as the trace page shows it (console.py's ``score``): three significant digits, no exponent. */
  function score(value) {
    return value.toLocaleString("en-US", { maximumSignificantDigits: 3, useGrouping: false });
  }

  /** The retrieved passages of /api/explain's trace: rank, chain (chunk → page → document), scores, used. */
  function passages(list) {
    const box = el("ol", "passages");
    box.id = "passages";
    for (const passage of list) {
      const item = el("li", passage.selected ? "passage selected" : "passage");
      item.dataset.rank = String(passage.rank);
      const head = el("p", "passage-head");
      head.append(el("span", "edge-number", `#${passage.rank}`), " ",
        passage.chain.length ? chain(passage.chain) : el("span", "muted", `${passage.chunk} (no longer stored)`), " ",
        el("span", `badge badge-${passage.selected ? "used" : "unused"}`, passage.selected ? "used" : "not used"));
      item.append(head, el("p", "scores muted small",
        `fused ${score(passage.fused)} · bm25 ${score(passage.lexical)} · cosine ${score(passage.semantic)}`));
      box.append(item);
    }
    return box;
  }

  function spanHref(span) {
    const url = new URL("/console/source", location.href);
    url.searchParams.set("id", span.chunk);
    url.searchParams.set("offset", String(span.offset));
    url.searchParams.set("length", String(span.length));
    return `${url.pathname}${url.search}#span`;
  }

  /** The answer's cited sentences: ``[n] "sentence"``, each a link to the source viewer with it highlighted;
      the first sentence of mark n is ``#cited-n``, the target of the answer's [n]. */
  function citedSpans(spans) {
    const box = el("ol", "cited");
    box.id = "cited";
    const marks = new Set();
    for (const span of spans) {
      const item = el("li", "cited-span");
      item.dataset.mark = String(span.mark);
      if (!marks.has(span.mark)) item.id = `cited-${span.mark}`;
      marks.add(span.mark);
      const quote = span.quote === null ? `chars ${span.offset}–${span.offset + span.length} of its chunk`
        : `"${span.quote}"`;
      const a = link(spanHref(span), `[${span.mark}] ${quote}`, "The cited sentence in its source");
      a.className = "cited-quote";
      item.append(a);
      if (span.chain.length > 1) {
        const where = span.chain.slice(1).reverse().map(GlassExplain.chainName).join(" › ");
        item.append(" ", el("span", "muted small", `in ${where}`));
      }
      box.append(item);
    }
    return box;
  }

  /** Outlines the cited sentences of mark ``number``. */
  function focusCited(number) {
    for (const item of document.querySelectorAll(".cited-span")) {
      item.classList.toggle("focused", item.dataset.mark === String(number));
    }
  }

  const MARK_TITLES = { edge: "The edge this rests on", cited: "The sentence this rests on" };

  /** Replaces the text of ``box`` with the same text whose [n] marks are links to ``#{target}-n`` (edge n, or
      the cited sentence of passage n, when n names a selected one; other marks stay text, flagged);
      ``onMark(n)`` runs when one is followed. With ``passages`` (GraphRAG with passages, numbered after the
      ``count`` edges), the marks past the edges link to their cited sentences. */
  function markAnswer(box, count, onMark, target = "edge", passages = 0) {
    const text = box.textContent;
    box.replaceChildren();
    let last = 0;
    for (const found of text.matchAll(/\[(\d{1,6})\]/g)) {
      box.append(text.slice(last, found.index));
      const number = Number(found[1]);
      const kind = number >= 1 && number <= count ? target : number > count && number <= count + passages ? "cited" : null;
      if (kind) {
        const mark = link(`#${kind}-${number}`, found[0], `${MARK_TITLES[kind]}: [${number}]`);
        mark.className = "mark";
        mark.dataset.number = String(number);
        mark.addEventListener("click", () => (kind === target ? onMark : focusCited)(number));
        box.append(mark);
      } else {
        box.append(el("span", "mark-invalid", found[0]));
      }
      last = found.index + found[0].length;
    }
    box.append(text.slice(last));
  }

  return { retrieval, selection, markAnswer, chain, el, link, passageCount, passages, citedSpans, focusCited };
})();
