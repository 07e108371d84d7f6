// Remember the reader's language choice so the chooser page at the site root honours it.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll("a.posenc-lang-switch")) {
    link.addEventListener("click", () => {
      try { localStorage.setItem("posenc-lang", link.dataset.posencLang); } catch (e) {}
    });
  }
});
