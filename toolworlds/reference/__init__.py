"""The reference toolworlds: banking, ticketing and orders."""
