/* The resource page's neighbourhood (cytoscape.js with GlassGraph's style and layered layout: the resource in
   the first column, what it links to and from in the next, long columns wrapped): read from
   /console/neighbourhood as explain-shaped triples (GlassExplain reads their names and kinds). Clicking a node
   adds its neighbourhood (once), in the column after it, and shows a link to its page. The instance is
   GlassGraph.instances.neighbourhood. */
"use strict";

(() => {
  const container = document.getElementById("neighbourhood");
  const panel = document.getElementById("neighbourhood-panel");
  if (!container) return;
  const TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
  const SOURCE = new Set(["Document", "Page", "Chunk"].map((k) => `https://trustgraph.ai/ns/${k}`));
  const index = new GlassExplain.Index();
  const cy = cytoscape({ container, style: GlassGraph.STYLE, elements: [] });
  GlassGraph.instances.neighbourhood = cy;
  cy.on("resize", () => GlassGraph.fit(cy));

  function nodeFor(iri) {
    const id = `n:${iri}`;
    const node = cy.getElementById(id);
    const name = index.name({ t: "i", i: iri });
    const isSource = index.objects(iri, TYPE).some((t) => SOURCE.has(t.i));
    if (node.nonempty()) {
      node.data("label", name);
      if (isSource) node.addClass("document");
      return node;
    }
    return cy.add({ group: "nodes", data: { id, iri, label: name }, classes: isSource ? "document" : "" });
  }

  async function expand(iri) {
    const response = await fetch(`/console/neighbourhood?iri=${encodeURIComponent(iri)}`,
      { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const { triples, complete } = await response.json();
    index.add(triples);
    cy.batch(() => {
      const centre = nodeFor(iri).addClass("expanded");
      if (iri === container.dataset.iri) centre.addClass("seed");
      for (const triple of triples) {
        if (triple.p.i === TYPE && SOURCE.has(triple.o.i)) continue;
        if (triple.p.i === "http://www.w3.org/2000/01/rdf-schema#label") continue;
        const source = nodeFor(triple.s.i);
        const target = nodeFor(triple.o.i);
        const id = `e:${triple.s.i} ${triple.p.i} ${triple.o.i}`;
        if (cy.getElementById(id).empty()) {
          cy.add({ group: "edges", data: { id, source: source.id(), target: target.id(), label: index.name(triple.p) },
                   classes: "labelled" });
        }
      }
      if (!complete) centre.addClass("partial");
    });
    GlassGraph.layered(cy);
    container.dataset.expanded = String(cy.nodes(".expanded").length);
  }

  cy.on("tap", "node", (event) => {
    const node = event.target;
    const iri = node.data("iri");
    panel.replaceChildren();
    const name = GlassSteps.el("p", "edge-triple");
    name.append(GlassSteps.link(`/resource?iri=${encodeURIComponent(iri)}`, node.data("label"), iri));
    panel.append(name, GlassSteps.el("p", "muted small", `${node.degree()} edges shown`));
    if (!node.hasClass("expanded")) expand(iri);
  });

  expand(container.dataset.iri);
})();
