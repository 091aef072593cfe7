#!/usr/bin/env python3
"""pa_sound.py: the sound run_pulseaudio.sh plays and what it finds in a recording.

  pa_sound.py make RAW WAV   0.6 s of random s16le 2ch 44100 Hz frames (a sound no
                             silence or rewound block can pass for), raw and as a WAV file
  pa_sound.py heard RAW REC  whether RAW is in the recording REC: "heard" when 90% of
                             the 10 ms blocks of RAW but the first and last 10 are found
                             in order (the null sink rewinds at a stream's start and
                             drain, which may cut those; an underrun of a loaded
                             machine puts silence inside a block), else how many of
                             them are missing; sound lost or garbled misses most
"""
import os
import sys
import wave

RATE, CHANNELS, WIDTH = 44100, 2, 2
BLOCK = RATE // 100 * CHANNELS * WIDTH


def make(raw, wav):
    frames = os.urandom(RATE * 6 // 10 * CHANNELS * WIDTH)
    with open(raw, "wb") as f:
        f.write(frames)
    with wave.open(wav, "wb") as w:
        w.setnchannels(CHANNELS)
        w.setsampwidth(WIDTH)
        w.setframerate(RATE)
        w.writeframes(frames)


def heard(raw, rec):
    played = open(raw, "rb").read()
    recorded = open(rec, "rb").read()
    blocks = [played[i : i + BLOCK] for i in range(0, len(played), BLOCK)][10:-10]
    found, at = 0, 0
    for b in blocks:
        i = recorded.find(b, at)
        if i >= 0:
            found += 1
            at = i + len(b)
    return found, len(blocks)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    else:
        found, total = heard(sys.argv[2], sys.argv[3])
        print("heard" if found * 10 >= total * 9 else f"{total - found} of {total} blocks missing")
