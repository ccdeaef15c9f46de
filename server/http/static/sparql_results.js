/* The SPARQL console's results table: the columns in the query's order (the response's head.vars),
   pages of PAGE_SIZE rows, a sort per column (click its heading; again to reverse) and a filter on the
   text of every cell. Terms render through GlassTerms (IRIs link to their resource pages). */
"use strict";

const GlassResults = (() => {
  const PAGE_SIZE = 50;
  const NUMERIC = /#(integer|decimal|double|float|long|int|short|byte|nonNegativeInteger|positiveInteger|negativeInteger|nonPositiveInteger|unsigned\w+)$/;

  /** What a term reads as, for filtering and sorting. */
  function termText(term) {
    if (!term) return "";
    if (term.type === "triple") {
      return ["subject", "predicate", "object"].map((part) => termText(term.value[part])).join(" ");
    }
    if (term.type === "uri") return `${GlassTerms.compact(term.value)} ${term.value}`;
    return term.value;
  }

  function sortKey(term) {
    if (!term) return null;
    if (term.type === "literal" && term.datatype && NUMERIC.test(term.datatype) && term.value.trim() !== "") {
      const number = Number(term.value);
      if (!Number.isNaN(number)) return number;
    }
    return termText(term);
  }

  /** Unbound last; numbers by value, before text; text in natural order ("e2" before "e10"). */
  function compare(a, b) {
    if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "number" || typeof b === "number") return typeof a === "number" ? -1 : 1;
    return a.localeCompare(b, undefined, { numeric: true });
  }

  /** ``parts``: {container, tools, filter, previous, next, info} elements of the page. */
  function create(parts) {
    let vars = [];
    let rows = [];  // {binding, texts (lower case, per variable), keys (per variable)}
    let sortBy = null;
    let descending = false;
    let needle = "";
    let page = 0;

    function visible() {
      let shown = needle ? rows.filter((row) => row.texts.some((text) => text.includes(needle))) : rows.slice();
      if (sortBy !== null) {
        const index = vars.indexOf(sortBy);
        shown.sort((a, b) => (descending ? -1 : 1) * compare(a.keys[index], b.keys[index]));
        if (descending) {  // unbound stays last either way
          shown = shown.filter((row) => row.keys[index] !== null).concat(shown.filter((row) => row.keys[index] === null));
        }
      }
      return shown;
    }

    function heading(name) {
      const th = document.createElement("th");
      th.setAttribute("aria-sort", sortBy === name ? (descending ? "descending" : "ascending") : "none");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.textContent = `?${name}`;
      button.title = `Sort by ?${name}`;
      button.addEventListener("click", () => {
        descending = sortBy === name ? !descending : false;
        sortBy = name;
        page = 0;
        render();
      });
      th.append(button);
      return th;
    }

    function render() {
      const shown = visible();
      const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
      page = Math.min(page, pages - 1);
      const table = document.createElement("table");
      table.className = "data results";
      const head = table.createTHead().insertRow();
      for (const name of vars) head.append(heading(name));
      const body = table.createTBody();
      for (const row of shown.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)) {
        const tr = body.insertRow();
        for (const name of vars) {
          const cell = tr.insertCell();
          if (row.binding[name]) cell.append(GlassTerms.render(row.binding[name]));
        }
      }
      parts.container.replaceChildren(table);
      const first = shown.length ? page * PAGE_SIZE + 1 : 0;
      const last = Math.min((page + 1) * PAGE_SIZE, shown.length);
      const of = needle ? `${shown.length.toLocaleString()} matching (${rows.length.toLocaleString()} in all)`
        : rows.length.toLocaleString();
      parts.info.textContent = `Rows ${first.toLocaleString()}–${last.toLocaleString()} of ${of}`;
      parts.previous.disabled = page === 0;
      parts.next.disabled = page >= pages - 1;
    }

    parts.filter.addEventListener("input", () => {
      needle = parts.filter.value.trim().toLowerCase();
      page = 0;
      render();
    });
    parts.previous.addEventListener("click", () => { page -= 1; render(); });
    parts.next.addEventListener("click", () => { page += 1; render(); });

    return {
      /** Shows SPARQL JSON results (a SELECT's): the first page, unsorted, unfiltered. */
      show(data) {
        vars = data.head.vars || [];
        rows = data.results.bindings.map((binding) => ({
          binding,
          texts: vars.map((name) => termText(binding[name]).toLowerCase()),
          keys: vars.map((name) => sortKey(binding[name])),
        }));
        sortBy = null;
        descending = false;
        needle = "";
        parts.filter.value = "";
        page = 0;
        parts.tools.hidden = false;
        render();
      },
      hide() {
        parts.tools.hidden = true;
      },
    };
  }

  return { create, PAGE_SIZE };
})();
