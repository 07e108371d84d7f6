/* The two pieces of Bootstrap the book's theme uses, in place of its 81 KB bundle
   (docs/_ext/posenc_assets.py swaps the script when the site is built).

   - Dropdowns: the header's download, launch and repository menus
     (data-bs-toggle="dropdown").  A click or Enter/Space on the toggle opens its menu;
     ArrowDown/ArrowUp move through the items; Escape, a click elsewhere or on an item,
     or focus leaving the menu closes it.  The menu opens below its toggle and is kept inside
     the window.
   - Tooltips: pydata-sphinx-theme makes one Bootstrap tooltip, on the button that
     collapses the sidebar.  Here a tooltip is the element's native title.  Every other
     data-bs-toggle="tooltip" already has a title, which the browser shows.

   tests/book/test_browser.py opens the download menu by mouse and keyboard at 390 and
   1280 px. */
(function () {
  "use strict";

  class Tooltip {
    constructor(element, options) {
      this.element = element;
      const title = options && options.title;
      if (element && title && !element.getAttribute("title")) {
        element.setAttribute("title", typeof title === "function" ? title() : title);
      }
    }
    show() {}
    hide() {}
    toggle() {}
    enable() {}
    disable() {}
    update() {}
    dispose() {}
    static getInstance() { return null; }
    static getOrCreateInstance(element, options) { return new Tooltip(element, options); }
  }

  const TOGGLE = '[data-bs-toggle="dropdown"]';

  function menuOf(toggle) {
    const parent = toggle.closest(".dropdown, .btn-group, .dropup, .dropend, .dropstart") ||
      toggle.parentElement;
    return parent ? parent.querySelector(".dropdown-menu") : null;
  }

  function items(menu) {
    return Array.from(menu.querySelectorAll(".dropdown-item"))
      .filter((el) => !el.disabled && el.getClientRects().length > 0);
  }

  function place(menu) {
    // below the toggle, starting at its left edge; moved left if it would leave the window
    menu.style.left = "0";
    menu.style.right = "auto";
    menu.setAttribute("data-bs-popper", "static");
    const box = menu.getBoundingClientRect();
    const room = document.documentElement.clientWidth;
    if (box.right > room) {
      menu.style.left = "auto";
      menu.style.right = "0";
      const again = menu.getBoundingClientRect();
      if (again.left < 0) menu.style.right = `${again.left}px`;
    }
  }

  function close(toggle, focusToggle) {
    const menu = menuOf(toggle);
    if (!menu || !menu.classList.contains("show")) return;
    menu.classList.remove("show");
    toggle.classList.remove("show");
    toggle.setAttribute("aria-expanded", "false");
    if (focusToggle) toggle.focus();
  }

  function closeAll(except) {
    document.querySelectorAll(`${TOGGLE}[aria-expanded="true"]`).forEach((t) => {
      if (t !== except) close(t, false);
    });
  }

  function open(toggle, focusFirst) {
    const menu = menuOf(toggle);
    if (!menu) return;
    closeAll(toggle);
    menu.classList.add("show");
    toggle.classList.add("show");
    toggle.setAttribute("aria-expanded", "true");
    place(menu);
    if (focusFirst) {
      const first = items(menu)[0];
      if (first) first.focus();
    }
  }

  class Dropdown {
    constructor(toggle) { this.toggleElement = toggle; }
    show() { open(this.toggleElement, false); }
    hide() { close(this.toggleElement, false); }
    toggle() {
      const expanded = this.toggleElement.getAttribute("aria-expanded") === "true";
      if (expanded) this.hide(); else this.show();
    }
    dispose() {}
    static getInstance() { return null; }
    static getOrCreateInstance(toggle) { return new Dropdown(toggle); }
  }

  document.addEventListener("click", (event) => {
    const toggle = event.target.closest(TOGGLE);
    if (toggle) {
      event.preventDefault();
      new Dropdown(toggle).toggle();
      return;
    }
    // a click outside the open menu, or on one of its items, closes it (as Bootstrap's
    // default autoClose does)
    if (!event.target.closest(".dropdown-menu.show") || event.target.closest(".dropdown-item")) {
      closeAll(null);
    }
  });

  document.addEventListener("keydown", (event) => {
    const toggle = event.target.closest(TOGGLE);
    const openMenu = event.target.closest(".dropdown-menu.show");
    if (event.key === "Escape") {
      const owner = openMenu ? openMenu.parentElement.querySelector(TOGGLE) : toggle;
      if (owner && owner.getAttribute("aria-expanded") === "true") {
        event.preventDefault();
        close(owner, true);
      }
      return;
    }
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    if (toggle) {
      event.preventDefault();
      open(toggle, true);
      return;
    }
    if (openMenu) {
      event.preventDefault();
      const list = items(openMenu);
      const here = list.indexOf(document.activeElement);
      const step = event.key === "ArrowDown" ? 1 : -1;
      const next = list[(here + step + list.length) % list.length];
      if (next) next.focus();
    }
  });

  document.addEventListener("focusin", (event) => {
    // focus moved out of an open menu and its toggle: the menu closes
    document.querySelectorAll(`${TOGGLE}[aria-expanded="true"]`).forEach((t) => {
      const box = t.closest(".dropdown, .btn-group") || t.parentElement;
      if (box && !box.contains(event.target)) close(t, false);
    });
  });

  window.bootstrap = Object.assign(window.bootstrap || {}, { Tooltip, Dropdown });
})();
