"""The designer role: write toolworlds from documents, judge them by hint-based regret, remember them."""
