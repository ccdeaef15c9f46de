/* Download links: <a href="URL?…&format=ttl" download="name">. The URL names its format (a plain
   link cannot send Accept), so the link works without scripts; with them, a click fetches it and
   saves the body, and a failure is shown next to the link instead of a failed download. A link
   with data-query (a SPARQL query too long for an address) POSTs that query to its URL instead.
   Loaded on every page: errorMessage() serves the others. */
"use strict";

const GlassDownload = (() => {
  /** The server's message, from a JSON error body ({"error": {"type", "message"}}) or plain text. */
  function errorMessage(text) {
    try {
      const body = JSON.parse(text);
      const error = body && typeof body === "object" ? body.error : null;
      if (error) return typeof error === "string" ? error : error.message || text;
    } catch (ignored) { /* plain text */ }
    return text;
  }

  function fail(link, message) {
    let note = link.nextElementSibling;
    if (!note || !note.classList.contains("download-error")) {
      note = document.createElement("span");
      note.className = "download-error";
      note.setAttribute("role", "alert");
      link.after(note);
    }
    note.textContent = ` ${message}`;
  }

  async function save(link) {
    let response;
    try {
      response = link.dataset.query === undefined ? await fetch(link.href) : await fetch(link.href, {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ query: link.dataset.query }),
      });
    } catch (failure) {
      fail(link, `cannot reach the server: ${failure.message}`);
      return;
    }
    if (!response.ok) {
      fail(link, `${response.status}: ${errorMessage(await response.text()).trim()}`);
      return;
    }
    const url = URL.createObjectURL(await response.blob());
    const anchor = document.createElement("a");
    anchor.href = url;
    anchor.download = link.getAttribute("download") || "download";
    document.body.append(anchor);
    anchor.click();
    anchor.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest('a[download]:not([href^="blob:"])');  // not the anchor save() clicks
    if (!link) return;
    event.preventDefault();
    save(link);
  });

  return { save, errorMessage };
})();
