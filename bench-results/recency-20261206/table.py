import json, os, sys
DIR = os.path.dirname(os.path.abspath(__file__))
rows = [("off", "0"), ("half-life 30 d, λ 0.05", "0.05"), ("half-life 30 d, λ 0.2", "0.2"), ("half-life 30 d, λ 1", "1"),
        ("half-life 30 d, λ 5", "5"), ("half-life 30 d, λ 20", "20"), ("tiers, λ 0.2", "t0.2"), ("tiers, λ 5", "t5")]
print("| recency prior | LoCoMo synapse R@10 | LoCoMo synapse-gnn R@10 | LoCoMo temporal (gnn) | BEAM synapse R@10 | BEAM synapse-gnn R@10 | BEAM knowledge update (gnn) | BEAM temporal (gnn) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for name, w in rows:
    l = json.load(open(f"{DIR}/locomo-{w}.json"))["modes"]
    b = json.load(open(f"{DIR}/beam-{w}.json"))["modes"]
    f = lambda m, mode, g: m[mode]["groups"][g]["recall@10"] * (100 if m[mode]["groups"][g]["recall@10"] <= 1 else 1)
    print(f"| {name} | {f(l,'synapse','1-4'):.1f} | {f(l,'synapse-gnn','1-4'):.1f} | {f(l,'synapse-gnn','temporal'):.1f} | {f(b,'synapse','1-4'):.1f} | {f(b,'synapse-gnn','1-4'):.1f} | {f(b,'synapse-gnn','knowledge_update'):.1f} | {f(b,'synapse-gnn','temporal_reasoning'):.1f} |")
