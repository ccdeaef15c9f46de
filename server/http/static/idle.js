/* The page's requests in flight: every fetch() of the console's scripts counts in
   <html data-requests="N"> from its start until its response body has fully arrived, it failed or it
   was aborted. "0" is the page's idle signal: the browser tests wait for it before they navigate
   away or check what a request shows. Loaded first on every page (base.html), before any script fetches. */
"use strict";

(() => {
  const root = document.documentElement;
  const send = window.fetch.bind(window);
  let inFlight = 0;

  function count(change) {
    inFlight += change;
    root.dataset.requests = String(inFlight);
  }

  /** Reads a copy of the body to its end, so the count covers the whole transfer (the page reads its
      own copy as it likes; aborting the request ends both). */
  async function drain(body) {
    const reader = body.getReader();
    try {
      while (!(await reader.read()).done) { /* the page's copy holds the data */ }
    } catch (ignored) { /* aborted or broken: the page's copy reports it */ }
  }

  window.fetch = (...args) => {
    count(1);
    return send(...args).then((response) => {
      if (response.body) drain(response.clone().body).finally(() => count(-1));
      else count(-1);
      return response;
    }, (failure) => {
      count(-1);
      throw failure;
    });
  };
  count(0);
})();
