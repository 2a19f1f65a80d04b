// MathJax settings for pymdownx.arithmatex (generic mode): it wraps every equation in an
// element of class "arithmatex" with \( \) or \[ \] delimiters; only those are typeset.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};

// Material swaps pages without a reload when instant navigation is on: typeset each one.
document$.subscribe(() => {
  MathJax.typesetPromise();
});
