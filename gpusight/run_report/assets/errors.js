// Any script error is written into the page (#js-errors) and marks the body, so a headless check can see it.
(function () {
  function report(message) {
    var box = document.getElementById("js-errors");
    box.hidden = false;
    box.textContent += message + "\n";
    document.body.setAttribute("data-error", "true");
  }
  window.addEventListener("error", function (event) {
    report("error: " + event.message + " (" + event.filename + ":" + event.lineno + ")");
  });
  window.addEventListener("unhandledrejection", function (event) { report("rejection: " + event.reason); });
  window.gpusightReportError = report;
})();
