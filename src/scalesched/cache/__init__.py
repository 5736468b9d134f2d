"""Cache- and tool-aware serving (issue 14): KV admission and placement."""
