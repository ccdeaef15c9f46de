/* The trace page: the explanation as a graph from the trace's triples (embedded as JSON, the shape the stream
   sends) and the answer's [n] marks linked to the numbered edges; for a document RAG trace, the marks linked
   to the cited sentences (listed under the answer by the page). */
"use strict";

(() => {
  const answer = document.getElementById("trace-answer");
  const marked = answer && !answer.classList.contains("no-answer");
  const data = document.getElementById("trace-triples");
  if (!data) {
    const used = document.querySelectorAll("#passages .passage.selected").length;
    if (marked) GlassSteps.markAnswer(answer, used, GlassSteps.focusCited, "cited");
    return;
  }
  const view = GlassExplain.view(new GlassExplain.Index().add(JSON.parse(data.textContent)));
  const panel = document.getElementById("trace-graph-panel");
  GlassGraph.draw(document.getElementById("trace-graph"), view, panel);
  if (marked) {
    const cited = Math.max(0, ...Array.from(document.querySelectorAll(".cited-span"), (item) => Number(item.dataset.mark)));
    GlassSteps.markAnswer(answer, view.selected.length, (number) => GlassGraph.focus("trace-graph", number, panel),
                          "edge", Math.max(0, cited - view.selected.length));
  }
})();
