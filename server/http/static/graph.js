/* The explanation as a graph (cytoscape.js, vendored): the retrieved subgraph faded, the selected edges
   highlighted and numbered as the answer's [n] marks, an edge and its reverse with the same predicate drawn
   once with two arrows, seeds outlined. Clicking an edge shows its reason and source passage in the panel;
   clicking a node opens its resource page (the panel's content is built with GlassSteps). GlassGraph.instances[id] is the cytoscape instance of the
   container with that id (the tests count its selected edges). */
"use strict";

const GlassGraph = (() => {
  const instances = {};
  const STYLE = [
    { selector: "node", style: {
      label: "data(label)", "font-size": 11, color: "#1f2937", "text-valign": "bottom", "text-margin-y": 4,
      "background-color": "#94a3b8", width: 18, height: 18, "text-wrap": "ellipsis", "text-max-width": 120 } },
    { selector: "node.literal", style: { shape: "round-rectangle", "background-color": "#e2e8f0",
      "border-width": 1, "border-color": "#94a3b8" } },
    { selector: "node.document", style: { shape: "rectangle", "background-color": "#fef3c7",
      "border-width": 1, "border-color": "#b45309", width: 16, height: 22 } },
    { selector: "node.seed", style: { "border-width": 4, "border-color": "#1d4ed8", "background-color": "#93c5fd" } },
    { selector: "node.on-path", style: { "background-color": "#c2410c" } },
    { selector: "node.focus", style: { "background-color": "#1d4ed8", width: 24, height: 24 } },
    { selector: "edge", style: {
      width: 1.5, "line-color": "#cbd5e1", "target-arrow-color": "#cbd5e1", "target-arrow-shape": "triangle",
      "curve-style": "bezier", opacity: 0.5, "font-size": 9, color: "#475569" } },
    { selector: "edge.both", style: { "source-arrow-shape": "triangle", "source-arrow-color": "#cbd5e1" } },
    { selector: "edge.labelled", style: { label: "data(label)", opacity: 0.9, "text-rotation": "autorotate",
      "text-background-color": "#ffffff", "text-background-opacity": 0.8 } },
    { selector: "edge.selected", style: {
      width: 4, "line-color": "#c2410c", "target-arrow-color": "#c2410c", "source-arrow-color": "#c2410c",
      opacity: 1, label: "data(label)", "font-size": 11, color: "#7c2d12", "font-weight": "bold",
      "text-rotation": "autorotate", "text-background-color": "#ffffff", "text-background-opacity": 0.9 } },
    { selector: "edge.active", style: { "line-color": "#1d4ed8", "target-arrow-color": "#1d4ed8", width: 5 } },
  ];

  /** Cytoscape elements of a view (GlassExplain.view): a node per term, an edge per retrieved or selected
      edge, merged with its reverse when the predicate is the same. */
  function elements(view) {
    const nodes = new Map();
    const edges = new Map();
    const seeds = new Set(view.seeds);
    const nodeId = (term) => {
      const key = GlassExplain.key(term);
      if (!nodes.has(key)) {
        const classes = [term.t === "i" ? "iri" : "literal"];
        if (term.t === "i" && seeds.has(term.i)) classes.push("seed");
        nodes.set(key, { data: { id: `n${nodes.size}`, label: view.name(term), iri: term.t === "i" ? term.i : null },
                         classes: classes.join(" ") });
      }
      return nodes.get(key).data.id;
    };
    const selected = new Map(view.selected.map((s) => [GlassExplain.edgeKey(s.edge), s]));
    const add = (edge) => {
      const source = nodeId(edge.s);
      const target = nodeId(edge.o);
      const predicate = GlassExplain.key(edge.p);
      const reverse = edges.get(`${target} ${predicate} ${source}`);
      const choice = selected.get(GlassExplain.edgeKey(edge));
      const id = `${source} ${predicate} ${target}`;
      if (reverse && !edges.has(id)) {
        if (!reverse.classes.includes("both")) reverse.classes = `${reverse.classes} both`;
      } else if (!edges.has(id)) {
        edges.set(id, { data: { id: `e${edges.size}`, source, target, label: view.name(edge.p), choices: [] },
                        classes: "" });
      }
      const drawn = edges.has(id) ? edges.get(id) : reverse;
      if (choice && !drawn.data.choices.includes(choice)) drawn.data.choices.push(choice);
    };
    view.retrieved.forEach(add);
    view.selected.forEach((s) => add(s.edge));
    for (const edge of edges.values()) {
      const numbers = edge.data.choices.map((c) => `[${c.number}]`).join("");
      if (numbers) {
        edge.classes = `${edge.classes} selected`;
        edge.data.label = `${numbers} ${edge.data.label}`;
      }
    }
    return { nodes: [...nodes.values()], edges: [...edges.values()] };
  }

  /** The panel's content for an edge: each selection's number, reason and source chains, the first chunk's
      passage; for an edge not selected, only that it was retrieved. */
  function showEdge(panel, edge) {
    const { el, link } = GlassSteps;
    const { choices, label } = edge.data();
    panel.replaceChildren();
    const heading = el("p", "edge-triple");
    heading.append(link(`/resource?iri=${encodeURIComponent(edge.source().data("iri") || "")}`,
      edge.source().data("label")), ` ${label.replace(/^(\[\d+\])+ /, "")} `, edge.target().data("label"));
    panel.append(heading);
    if (!choices.length) {
      panel.append(el("p", "muted", "Retrieved, not selected."));
      return;
    }
    for (const choice of choices) {
      panel.append(el("p", "reasoning", `[${choice.number}] ${choice.reasoning || ""}`));
      for (const nodes of choice.sources) {
        const line = el("p", "small");
        line.append("Source: ", GlassSteps.chain(nodes, choice.edge));
        panel.append(line);
      }
      const chunk = choice.sources.map((c) => c[0]).find((n) => n && n.type === "Chunk");
      if (chunk) passage(panel, chunk, choice.edge);
    }
  }

  async function passage(panel, chunk, edge) {
    const { el } = GlassSteps;
    const quote = el("blockquote", "passage");
    panel.append(quote);
    try {
      const response = await fetch(`/console/source/passage?id=${encodeURIComponent(chunk.iri)}&edge=${
        encodeURIComponent(GlassExplain.ntriples({ t: "r", r: edge }))}`, { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const { text, span } = await response.json();
      if (span) {
        quote.append(text.slice(0, span[0]), el("mark", null, text.slice(span[0], span[1])), text.slice(span[1]));
      } else {
        quote.textContent = text;
      }
    } catch (ignored) { /* the chain links stay */ }
  }

  /** Draws ``view`` into ``container``; ``panel`` shows what is clicked. */
  function draw(container, view, panel) {
    if (instances[container.id]) instances[container.id].destroy();  // the Ask page draws once per question
    const cy = cytoscape({
      container, elements: elements(view), style: STYLE,
      layout: { name: "cose", animate: false, randomize: false, nodeRepulsion: () => 9000, idealEdgeLength: () => 90 },
    });
    const onPath = cy.edges(".selected").connectedNodes().addClass("on-path");
    const shown = onPath.length ? onPath.union(onPath.neighborhood()) : cy.elements();  // the selection and around it
    cy.fit(shown, 30);
    cy.on("resize", () => cy.fit(shown, 30));
    cy.on("tap", "edge", (event) => {
      cy.edges().removeClass("active");
      event.target.addClass("active");
      if (panel) showEdge(panel, event.target);
    });
    cy.on("tap", "node", (event) => {
      const iri = event.target.data("iri");
      if (iri) location.assign(`/resource?iri=${encodeURIComponent(iri)}`);
    });
    instances[container.id] = cy;
    return cy;
  }

  /** Selects the edges of selection number ``number`` and shows it in the panel (the answer's [n] marks). */
  function focus(id, number, panel) {
    const cy = instances[id];
    if (!cy) return;
    const edge = cy.edges().filter((e) => e.data("choices").some((c) => c.number === number))[0];
    if (!edge) return;
    cy.edges().removeClass("active");
    edge.addClass("active");
    if (panel) showEdge(panel, edge);
  }

  return { instances, draw, focus, STYLE };
})();
