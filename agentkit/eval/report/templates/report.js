// The runs table's filters: outcome, "flipped only" and a scenario name (no network, no library).
(function () {
  var outcome = document.getElementById("filter-outcome");
  var flipped = document.getElementById("filter-flipped");
  var text = document.getElementById("filter-text");
  var count = document.getElementById("filter-count");
  var runs = Array.prototype.slice.call(document.querySelectorAll("tbody.ak-run"));
  function apply() {
    var shown = 0;
    runs.forEach(function (run) {
      var ok = (!outcome.value || run.dataset.outcome === outcome.value) &&
        (!flipped.checked || run.dataset.flipped === "1") &&
        (!text.value || run.dataset.scenario.indexOf(text.value) !== -1);
      run.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + " of " + runs.length + " runs shown";
  }
  outcome.addEventListener("change", apply);
  flipped.addEventListener("change", apply);
  text.addEventListener("input", apply);
  apply();
})();
