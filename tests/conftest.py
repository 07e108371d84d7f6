"""The test tree mirrors the package: encodings/, analysis/, figures/, book/, bench/.

This file sits at the top of tests/ so that pytest puts tests/ on sys.path, and the shared
helpers (book_parity, browser_site) import from every subfolder.
"""
