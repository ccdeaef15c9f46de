/* Resource page: "Expand all" and "Collapse all" for the predicate groups (each a <details>, which
   opens and closes without scripts). */
"use strict";

(() => {
  const groups = [...document.querySelectorAll("details.predicate-group")];
  const expand = document.getElementById("expand-all");
  const collapse = document.getElementById("collapse-all");
  if (!expand || groups.length < 2) return;
  expand.hidden = false;
  collapse.hidden = false;
  expand.addEventListener("click", () => groups.forEach((group) => { group.open = true; }));
  collapse.addEventListener("click", () => groups.forEach((group) => { group.open = false; }));
})();
