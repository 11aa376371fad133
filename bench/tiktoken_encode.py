"""tiktoken (OpenAI's Rust core, from PyPI) encoding a UTF-8 file with GPT-2's ranks, read from
tests/fixtures/gpt2 (nothing downloaded); bench/compare_gpt2_tokenizer.sh runs it.
    python bench/tiktoken_encode.py FILE THREADS
prints "IDS MB/s" of one timed encode after a warm-up one, the file already in memory;
    python bench/tiktoken_encode.py --ids FILE
prints the ids themselves, separated by spaces (as `attn bpe encode` writes them). One
thread is encode_ordinary on the whole text; more is encode_ordinary_batch over THREADS parts
cut after a newline that a letter follows (where GPT-2's pattern always ends a piece, so the ids
are the same)."""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from gpt2_oracles import gpt2_oracles  # noqa: E402


def parts_of(text, count):
    parts, start = [], 0
    for k in range(1, count):
        cut = text.find("\n", max(start, len(text) * k // count))
        while cut != -1 and cut + 1 < len(text) and not text[cut + 1].isalpha():
            cut = text.find("\n", cut + 1)
        if cut == -1:
            break
        parts.append(text[start:cut + 1])
        start = cut + 1
    return parts + [text[start:]]


def main():
    encoding = gpt2_oracles(ROOT / "tests" / "fixtures" / "gpt2").tiktoken
    if sys.argv[1] == "--ids":
        text = Path(sys.argv[2]).read_bytes().decode("utf-8")
        print(" ".join(map(str, encoding.encode_ordinary(text))))
        return
    path, threads = Path(sys.argv[1]), int(sys.argv[2])
    data = path.read_bytes()
    text = data.decode("utf-8")
    if threads == 1:
        encode = lambda: encoding.encode_ordinary(text)
    else:
        parts = parts_of(text, threads)
        encode = lambda: [i for ids in encoding.encode_ordinary_batch(parts, num_threads=threads)
                          for i in ids]
    encode()  # warm-up: the ranks' tables and the regex
    start = time.perf_counter()
    ids = encode()
    seconds = time.perf_counter() - start
    print(len(ids), f"{len(data) / seconds / 1e6:.2f}")


if __name__ == "__main__":
    main()
