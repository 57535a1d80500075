// attention-book site behaviour (added by book/_ext/site_fixes.py; tested in tests/test_navigation.py).
// On narrow screens the chapter list and the page contents open as modal dialogs
// (pydata-sphinx-theme). Following a link inside one should show the place it leads to, so the
// dialog closes as the link is followed (the theme only closes it on Escape or a backdrop click,
// which left an in-page link's target hidden behind the open panel).
document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["pst-primary-sidebar-modal", "pst-secondary-sidebar-modal"]) {
    const dialog = document.getElementById(id);
    if (!dialog) continue;
    dialog.addEventListener("click", (event) => {
      if (dialog.open && event.target.closest("a[href]")) dialog.close();
    });
  }
});
