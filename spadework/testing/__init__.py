"""Test and benchmark infrastructure that scripts the real parts: `mock_server`, a scripted model server.

It sits above every layer (it scripts toolworlds, the engine's protocols and the benchmarks' entries), so
nothing in engine/, toolworlds/, trainers/ or benchmarks/ may import it."""
