"""What generation returns: a result per prompt, and a step event per step of each prompt while
streaming."""

import dataclasses
from dataclasses import dataclass, field

from mosaic._mosaic import Error


@dataclass
class GenerationResult:
    """One prompt's generation (the fields of `mosaic generate --json`, plus the memory peak)."""

    text: str                    # the answer decoded, up to the first EOS / end of turn
    prompt_ids: list             # the prompt as token ids (after the chat format, if any)
    output_ids: list             # the generated region (mask id where nothing was decoded)
    steps: int                   # denoising steps taken
    forwards: int                # steps that ran a forward (NFE)
    seconds: float               # wall time of the whole batch's generation
    tokens_per_step: list        # positions unmasked at each step
    stopped_at_eos: bool
    cancelled: bool
    activation_peak_bytes: int   # largest planned activation peak of a step it took part in
    cache: str = "none"          # the KV cache it decoded with: none, prefix, dual or block
    # Wall time of the forwards it took part in, and the host's launch time inside them; the host's
    # share of the generation is at most (seconds - forward_seconds + forward_host_seconds) / seconds.
    forward_seconds: float = 0.0
    forward_host_seconds: float = 0.0

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclass
class StepEvent:
    """One denoising step of one request, as engine.stream() yields it.

    `confidence[i]` is the score position `committed[i]` was ranked by (the probability of its
    token for LLaDA's low_confidence and Dream's maskgit_plus; see mosaic::GenerateEvent).
    """

    request: int                 # index of the prompt in the batch
    step: int                    # steps this request has taken
    masked_left: int             # positions still masked
    finished: bool               # this request is done (its last event)
    output_ids: list             # the generated region now (mask id where still masked)
    committed: list              # positions in the generated region unmasked by this step
    confidence: list             # the confidence each committed position was ranked by
    batch_sequences: int         # the step's packed forward: sequences, tokens, candidate rows
    batch_tokens: int
    batch_candidates: int
    planned_peak_bytes: int      # the step's planned activation peak
    mask_token_id: int = field(repr=False)
    _decode: object = field(repr=False, compare=False)  # ids -> str; None without a tokenizer

    @property
    def committed_ids(self):
        """Token ids unmasked by this step, in position order."""
        return [self.output_ids[p] for p in sorted(self.committed)]

    @property
    def committed_text(self):
        """The tokens this step unmasked, decoded in position order (needs a tokenizer)."""
        return self._text_of(self.committed_ids)

    @property
    def text(self):
        """Every token decoded so far, masked positions left out (special tokens skipped)."""
        return self._text_of([t for t in self.output_ids if t != self.mask_token_id])

    def canvas(self, mask="\u2591"):
        """The generated region with each still-masked position drawn as `mask`: text with a
        tokenizer, else token ids separated by spaces."""
        if self._decode is None:
            return " ".join(mask if t == self.mask_token_id else str(t) for t in self.output_ids)
        return "".join(mask if t == self.mask_token_id else self._decode([t]) for t in self.output_ids)

    def _text_of(self, ids):
        if self._decode is None:
            raise Error("this model folder has no tokenizer.json: use output_ids / committed_ids")
        return self._decode(ids)
