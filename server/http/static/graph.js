/* The explanation as a graph (cytoscape.js, vendored), read left to right: the seeds in the first column, the
   selected edges leading from them to the answer, numbered as the answer's [n] marks (a layered layout: a
   node's column is its distance from the seeds, its place in the column follows its neighbours', so labels
   never overlap). The retrieved edges that were not selected are collapsed into one "+N retrieved" node per
   seed, which a click expands; an edge and its reverse with the same predicate are drawn once with two
   arrows. The drawing is fitted to its box at every width. Clicking an edge shows its reason and source
   passage in the panel; clicking a node opens its resource page (the panel's content is built with
   GlassSteps). GlassGraph.instances[id] is the cytoscape instance of the container with that id (the tests
   count its selected edges). */
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
      "text-background-color": "#ffffff", "text-background-opacity": 0.8,
      "min-zoomed-font-size": 8 } },  // hidden while too small to read: a fan of labels is noise until zoomed
    { selector: "edge.selected", style: {
      width: 4, "line-color": "#c2410c", "target-arrow-color": "#c2410c", "source-arrow-color": "#c2410c",
      opacity: 1, label: "data(label)", "font-size": 11, color: "#7c2d12", "font-weight": "bold",
      "text-rotation": "autorotate", "text-background-color": "#ffffff", "text-background-opacity": 0.9 } },
    { selector: "edge.active", style: { "line-color": "#1d4ed8", "target-arrow-color": "#1d4ed8", width: 5 } },
    { selector: "node.context", style: { shape: "round-rectangle", "background-color": "#f1f5f9", "border-width": 1,
      "border-style": "dashed", "border-color": "#64748b", width: 22, height: 14, color: "#475569" } },
    { selector: "edge.context-link", style: { "line-style": "dashed", "target-arrow-shape": "none", opacity: 0.6 } },
  ];
  const COLUMN = 220;  // between columns (model units): a label is at most 120 wide and sits under its node
  const ROW = 48;  // between the nodes of a column: a node and its one line of label
  const WRAP_AFTER = 12;  // a longer column is wrapped into sub-columns (staggered by half a row), as many as
                         // keep the drawing's shape near its box's (a phone's box is about square)
  const FIRST_NODES = 40;  // at most this many nodes drawn at first, but for the answer's path (initial)

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

  /** The elements drawn at first: the seeds, the selected edges and their nodes, and per seed one "+N retrieved"
      node for the retrieved edges at that seed that are not selected. Seeds off the answer's path are drawn
      while the drawing has fewer than FIRST_NODES nodes; the rest are counted in one "+K seeds" node (a click
      draws everything). With no seed and no selection, all. */
  function initial(all) {
    const selected = all.edges.filter((e) => e.classes.includes("selected"));
    const shown = new Set(selected.flatMap((e) => [e.data.source, e.data.target]));
    const seeds = all.nodes.filter((n) => n.classes.includes("seed"));
    if (!shown.size && !seeds.length) return [...all.nodes, ...all.edges];
    const hiddenAt = new Map(seeds.map((seed) => [seed.data.id, all.edges.filter((e) => !e.classes.includes("selected")
      && (e.data.source === seed.data.id || e.data.target === seed.data.id))]));  // per seed, once
    const cost = (seed) => (shown.has(seed.data.id) ? 0 : 1) + (hiddenAt.get(seed.data.id).length ? 1 : 0);
    const onPath = seeds.filter((n) => shown.has(n.data.id));
    const offPath = seeds.filter((n) => !shown.has(n.data.id));
    const whole = shown.size + seeds.reduce((sum, seed) => sum + cost(seed), 0);
    const budget = whole <= FIRST_NODES ? FIRST_NODES : FIRST_NODES - 1;  // a place for "+K seeds" if needed
    const contexts = [];
    let drawn = 0;
    let count = shown.size;
    for (const seed of [...onPath, ...offPath]) {  // the path's seeds always, then the others in their order
      const id = seed.data.id;
      if (!shown.has(id) && count + cost(seed) > budget) break;
      count += cost(seed);
      shown.add(id);
      drawn += 1;
      const hidden = hiddenAt.get(id);
      if (!hidden.length) continue;
      contexts.push({ data: { id: `c${id}`, label: `+${hidden.length} retrieved`, seed: id }, classes: "context" },
                    { data: { id: `l${id}`, source: id, target: `c${id}`, label: "", choices: [] }, classes: "context-link" });
    }
    const left = seeds.length - drawn;
    if (left) contexts.push({ data: { id: "more-seeds", label: `+${left} seeds` }, classes: "context" });
    return [...all.nodes.filter((n) => shown.has(n.data.id)), ...selected, ...contexts];
  }

  /** Columns by distance from the seeds along the drawn edges (either way); in a column, nodes in the order of
      their neighbours in the column before (a barycentre sweep), so that edges cross as little as they can. */
  function layered(cy) {
    const column = new Map();
    // the seeds first; a context node on its own ("+K seeds") stands with them
    let frontier = cy.nodes(".seed").union(cy.nodes(".context").filter((n) => n.degree() === 0)).toArray();
    for (;;) {
      if (!frontier.length) {
        const rest = cy.nodes().filter((n) => !column.has(n.id()));
        if (!rest.length) break;
        frontier = [rest[0]];  // a part not reached from any seed starts a column after the rest
        column.set(rest[0].id(), column.size ? Math.max(...column.values()) + 1 : 0);
      } else {
        frontier.forEach((n) => { if (!column.has(n.id())) column.set(n.id(), 0); });
      }
      const next = [];
      for (const node of frontier) {
        for (const other of node.neighborhood("node").toArray()) {
          if (!column.has(other.id())) {
            column.set(other.id(), column.get(node.id()) + 1);
            next.push(other);
          }
        }
      }
      frontier = next;
    }
    const columns = [];
    for (const node of cy.nodes().toArray()) (columns[column.get(node.id())] ||= []).push(node);
    const place = new Map();
    const positions = {};
    const shape = (COLUMN * cy.height()) / (ROW * Math.max(cy.width(), 1));  // rows per sub-column, per node
    let x = 0;
    columns.forEach((nodes, index) => {
      const mean = (node) => {
        const before = node.neighborhood("node").filter((o) => column.get(o.id()) === index - 1).toArray();
        return before.length ? before.reduce((sum, o) => sum + place.get(o.id()), 0) / before.length : 1e9;
      };
      if (index > 0) nodes.sort((a, b) => mean(a) - mean(b));
      const perColumn = Math.max(WRAP_AFTER, Math.ceil(Math.sqrt(nodes.length * shape)));
      const wraps = Math.ceil(nodes.length / perColumn);
      const rows = Math.ceil(nodes.length / wraps);
      nodes.forEach((node, i) => {
        const sub = Math.floor(i / rows);
        const row = i % rows + (sub % 2) / 2;
        place.set(node.id(), row);  // the next column is ordered by height, whatever the sub-column
        positions[node.id()] = { x: x + sub * COLUMN, y: (row - (rows - 1) / 2) * ROW };
      });
      x += wraps * COLUMN;
    });
    cy.layout({ name: "preset", positions: (node) => positions[node.id()], fit: false, animate: false }).run();
    fit(cy);
  }

  /** The whole drawing in its box (and again whenever the box changes size). */
  function fit(cy) {
    cy.fit(cy.elements(), 24);
  }

  /** Adds the retrieved edges (and their nodes) at ``seed`` that are not drawn yet, or every one (no seed). */
  function expand(cy, all, seed) {
    const at = (e) => seed === undefined || e.data.source === seed || e.data.target === seed;
    const edges = all.edges.filter((e) => at(e) && !cy.getElementById(e.data.id).length);
    const ends = new Set(edges.flatMap((e) => [e.data.source, e.data.target]));
    cy.add(all.nodes.filter((n) => ends.has(n.data.id) && !cy.getElementById(n.data.id).length));
    cy.add(edges);
    cy.remove(seed === undefined ? cy.elements(".context, .context-link")
      : cy.getElementById(`c${seed}`).union(cy.getElementById(`l${seed}`)));
    layered(cy);
  }

  /** Draws ``view`` into ``container``; ``panel`` shows what is clicked. */
  function draw(container, view, panel) {
    if (instances[container.id]) instances[container.id].destroy();  // the Ask page draws once per question
    const all = elements(view);
    const cy = cytoscape({ container, elements: initial(all), style: STYLE, layout: { name: "preset" } });
    cy.nodes(".iri, .literal").filter((n) => n.connectedEdges(".selected").length).addClass("on-path");
    layered(cy);
    cy.on("resize", () => fit(cy));
    cy.on("tap", "edge", (event) => {
      if (event.target.hasClass("context-link")) return;
      cy.edges().removeClass("active");
      event.target.addClass("active");
      if (panel) showEdge(panel, event.target);
    });
    cy.on("tap", "node", (event) => {
      if (event.target.hasClass("context")) {
        expand(cy, all, event.target.data("seed"));  // "+K seeds" has none: everything
        return;
      }
      const iri = event.target.data("iri");
      if (iri) location.assign(`/resource?iri=${encodeURIComponent(iri)}`);
    });
    const everything = document.getElementById(`${container.id}-all`);
    if (everything) everything.onclick = () => expandAll(container.id);
    cy.scratch("glass-all", all);  // what expandAll draws
    instances[container.id] = cy;
    return cy;
  }

  /** Draws every retrieved edge in graph ``id`` (its "show all" button). */
  function expandAll(id) {
    const cy = instances[id];
    if (cy) expand(cy, cy.scratch("glass-all"));
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

  return { instances, draw, expandAll, focus, layered, fit, STYLE };
})();
