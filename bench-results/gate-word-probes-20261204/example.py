# The example in docs/results.md: both probes of one adversarial question, its answerable
# form and a paraphrase, against Audrey's turn (conv-44 D18:6 of the dev file, speaker: text).
#   python3 bench-results/gate-word-probes-20261204/example.py > example.txt
import importlib.util, re
from pathlib import Path
root = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("probes", root / "scripts" / "gate-word-probes.py")
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
m = p.MiniLM(p.MODEL)
turn = ("Audrey: That's great! Glad you found ways to relax. It's nice to have those little moments of joy. "
        "Something cool recently happened with my furry friends - I organized a doggy playdate with the neighbors' dogs. "
        "Seeing all those tails wagging was so sweet. They must have had so much fun!")
xt, _, v = m.hidden(turn)
for q in ["What did Audrey organize with the neighbors' cats?", "What did Audrey organize with the neighbors' dogs?",
          "What did Audrey arrange with the neighbors' dogs?"]:
    xq, enc, e = m.hidden(q)
    base = float(e @ v)
    print(f"{q}  cosine {base:.3f}")
    for w in p.content_words(q, {"audrey", "andrew"}):
        rows = [i for i, (a, b) in enumerate(enc.offsets)
                if b > a and any(x.start() <= a < x.end() and x.group(0) == w for x in p.WORD.finditer(q))]
        rest = re.sub(r"\s+", " ", re.sub(r"\b" + re.escape(w) + r"\b", "", q)).strip()
        print(f"  {w:<10} align {float((xq[rows] @ xt.T).max()):.3f}  drop gain {float(m.embed(rest) @ v) - base:+.3f}")
