"""The report page as a browser would parse it: its elements, their attributes, its text (standard library)."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """What a browser would build from the page: its elements, their attributes, its text."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())
