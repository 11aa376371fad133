// The text the seed checkpoints were trained on, which the checkpoint harness resumes on.
#pragma once

namespace attn::fuzz {

inline constexpr char kCorpusText[] =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
    "resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief enemy to the people."
    "\n\nAll:\nWe know't, we know't.\n\nFirst Citizen:\nLet us kill him, and we'll have corn "
    "at our own price.\nIs't a verdict?\n\nAll:\nNo more talking on't; let it be done: away, "
    "away!\n";

}  // namespace attn::fuzz
