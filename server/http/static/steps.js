/* What the console shows of a trace's steps, built from GlassExplain's view with DOM nodes (no HTML
   strings): the retrieval's seeds and counts, the selected edges with their number, reason, chooser and
   source chains (links to the source viewer), and an answer whose [n] marks link to those edges. */
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

  /** Replaces the text of ``box`` with the same text whose [n] marks are links to edge n (when n names a
      selected edge; other marks stay text, flagged); ``onMark(n)`` runs when one is followed. */
  function markAnswer(box, count, onMark) {
    const text = box.textContent;
    box.replaceChildren();
    let last = 0;
    for (const found of text.matchAll(/\[(\d{1,6})\]/g)) {
      box.append(text.slice(last, found.index));
      const number = Number(found[1]);
      if (number >= 1 && number <= count) {
        const mark = link(`#edge-${number}`, found[0], `The edge this rests on: [${number}]`);
        mark.className = "mark";
        mark.dataset.number = String(number);
        mark.addEventListener("click", () => onMark(number));
        box.append(mark);
      } else {
        box.append(el("span", "mark-invalid", found[0]));
      }
      last = found.index + found[0].length;
    }
    box.append(text.slice(last));
  }

  return { retrieval, selection, markAnswer, chain, el, link };
})();
