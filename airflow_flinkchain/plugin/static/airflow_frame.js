/* airflow-flinkchain: the plugin pages inside the Airflow 3 UI.
   The UI shows a plugin view in a same-origin iframe sandboxed with
   "allow-scripts allow-same-origin allow-forms allow-downloads": no allow-top-navigation
   and no allow-popups, so target="_top" links and window.open do nothing there.
   A same-origin frame may still use its parent's history: links to the Airflow UI
   push the address in the Airflow window and tell the UI's router (React Router) with a
   popstate, as the browser's back button does; the UI then shows that page itself.
   Opened on its own (not in the UI), a page behaves as a normal web page. */
(function () {
  "use strict";

  // The Airflow UI window holding this page, or null.
  function airflowWindow() {
    if (window.parent === window) return null;
    try {
      return window.parent.location.origin === location.origin ? window.parent : null;
    } catch (error) {  // another origin: not the Airflow UI
      return null;
    }
  }

  // The address the user sees: the Airflow UI's, or this page's when opened on its own.
  function address() {
    return new URL((airflowWindow() || window).location.href);
  }

  // Go to `url` (an Airflow UI address): in the Airflow window when in its frame.
  // replace: change the current history entry instead of adding one.
  function navigate(url, { replace = false } = {}) {
    const target = new URL(url, location.href);
    const ui = airflowWindow();
    if (!ui || target.origin !== location.origin) {
      if (replace) history.replaceState(history.state, "", target.href);
      else location.assign(target.href);
      return;
    }
    // The entry keeps the shape the UI's router gives its own ({usr, key, idx}).
    const current = ui.history.state || {};
    const state = replace ? current
      : { usr: null, key: Math.random().toString(36).slice(2, 10), idx: (current.idx ?? 0) + 1 };
    ui.history[replace ? "replaceState" : "pushState"](state, "", target.pathname + target.search + target.hash);
    ui.dispatchEvent(new PopStateEvent("popstate", { state }));
  }

  // Call `callback` when the Airflow UI's address changes (back/forward, our own navigate).
  function onAddressChange(callback) {
    const ui = airflowWindow();
    if (!ui) { window.addEventListener("popstate", callback); return; }
    ui.addEventListener("popstate", callback);
    window.addEventListener("pagehide", () => ui.removeEventListener("popstate", callback));
  }

  // Links marked data-airflow-link go to the Airflow UI. In the frame the sandbox would block a
  // new tab too (no allow-popups), so any primary click, with or without modifier, stays here.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[data-airflow-link]");
    if (!link || event.button !== 0 || event.defaultPrevented || !airflowWindow()) return;
    event.preventDefault();
    navigate(link.href);
  });

  window.AirflowFrame = { airflowWindow, address, navigate, onAddressChange };
})();
