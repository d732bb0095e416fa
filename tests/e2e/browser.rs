//! The dashboard in a real browser (headless Chromium through WebDriver).
