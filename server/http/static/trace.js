/* The trace page: the explanation as a graph from the trace's triples (embedded as JSON, the shape the stream
   sends) and the answer's [n] marks linked to the numbered edges. */
"use strict";

(() => {
  const data = document.getElementById("trace-triples");
  if (!data) return;
  const view = GlassExplain.view(new GlassExplain.Index().add(JSON.parse(data.textContent)));
  const panel = document.getElementById("trace-graph-panel");
  GlassGraph.draw(document.getElementById("trace-graph"), view, panel);
  const answer = document.getElementById("trace-answer");
  if (answer && !answer.classList.contains("no-answer")) {
    GlassSteps.markAnswer(answer, view.selected.length, (number) => GlassGraph.focus("trace-graph", number, panel));
  }
})();
