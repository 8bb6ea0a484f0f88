"""Document order of a Qdrant collection's chunks from exact counts (no scroll of every key):
the layout a :class:`~qrag_integrations.stores.qdrant.QdrantSource` uses on big or server-indexed
collections (``rank_by="count"``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from qdrant_client import models

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.positions import layout_positions
from qrag_integrations.stores.qdrant_filters import METADATA, metadata_field
from qrag_integrations.stores.rows import KEY_DOC_RANK, KEY_ID, KEY_ORDER

#: Payload key of a point's text (the layout ``langchain-qdrant`` reads).
CONTENT = "page_content"
#: Points per scroll page.
PAGE = 1024


def scroll_all(
    client: Any, collection_name: str, filter: models.Filter | None, fields: list[str] | bool
) -> list[Any]:
    """Every point of ``collection_name`` matching ``filter``, with the payload ``fields``."""
    out, offset = [], None
    while True:
        page, offset = client.scroll(
            collection_name, scroll_filter=filter, limit=PAGE, offset=offset, with_payload=fields
        )
        out.extend(page)
        if offset is None:
            return out


def both(*filters: models.Filter | None) -> models.Filter | None:
    """The conjunction of the filters given (``None``s left out; ``None`` when none is left)."""
    parts = [f for f in filters if f is not None]
    return None if not parts else parts[0] if len(parts) == 1 else models.Filter(must=parts)


def _doc_is(doc_rank: int) -> models.FieldCondition:
    return models.FieldCondition(
        key=metadata_field(KEY_DOC_RANK), match=models.MatchValue(value=doc_rank)
    )


class CountLayout:
    """A :class:`~qrag_integrations.stores.search.StoreLayout` from exact Qdrant counts: one per
    ranked key, and two per document whose fixed positions are asked for (kept for the search)."""

    def __init__(
        self, client: Any, collection_name: str, filter: models.Filter | None, n: int
    ) -> None:
        """``client``: the ``QdrantClient`` holding ``collection_name``; ``filter``: the native
        filter the chunks match; ``n``: how many do."""
        self.client, self.collection_name = client, collection_name
        self.filter, self.n = filter, n
        self._doc_of: dict[int, int] = {}  # rank -> doc_rank, for every key ranked so far
        self._span: dict[int, tuple[int, int]] = {}  # doc_rank -> (first rank, covered chunks)
        self._chunks: tuple[list[str], list[str]] | None = None  # (ids, texts), read on demand

    def _count(self, condition: models.Filter | models.FieldCondition) -> int:
        where = both(self.filter, models.Filter(must=[condition]))
        return self.client.count(self.collection_name, count_filter=where, exact=True).count

    def ranks(self, keys: np.ndarray) -> np.ndarray:
        """How many of the matching chunks sort before each of ``keys`` ``(K, 2)``."""
        out = []
        for doc_rank, order in np.asarray(keys, dtype=np.int64).reshape(-1, 2).tolist():
            before = models.Filter(
                should=[
                    models.FieldCondition(
                        key=metadata_field(KEY_DOC_RANK), range=models.Range(lt=doc_rank)
                    ),
                    models.Filter(
                        must=[
                            _doc_is(doc_rank),
                            models.FieldCondition(
                                key=metadata_field(KEY_ORDER), range=models.Range(lt=order)
                            ),
                        ]
                    ),
                ]
            )
            out.append(self._count(before))
            self._doc_of[out[-1]] = doc_rank
        return np.asarray(out, dtype=np.int64)

    def document_spans(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(first rank, matching chunk count)`` of the document of each chunk at ``ranks`` (each
        one ranked by :meth:`ranks` before).

        Raises:
            QRAGError: a rank this layout never ranked.
        """
        ranks = np.asarray(ranks, dtype=np.int64)
        first, length = np.zeros_like(ranks), np.zeros_like(ranks)
        for i, rank in enumerate(ranks.tolist()):
            if rank not in self._doc_of:
                raise QRAGError(f"rank {rank} was not ranked by this Qdrant count layout")
            doc_rank = self._doc_of[rank]
            if doc_rank not in self._span:
                below = models.FieldCondition(
                    key=metadata_field(KEY_DOC_RANK), range=models.Range(lt=doc_rank)
                )
                self._span[doc_rank] = (self._count(below), self._count(_doc_is(doc_rank)))
            first[i], length[i] = self._span[doc_rank]
        return first, length

    def document_positions(self, ranks: np.ndarray, step: int, span: float) -> np.ndarray:
        """Fixed positions (document position mode) of the chunks at ``ranks``: their order among
        the matching chunks of their document."""
        first, length = self.document_spans(ranks)
        return layout_positions(np.asarray(ranks, dtype=np.int64) - first, length, step, span)

    def _rows(self) -> tuple[list[str], list[str]]:
        """``(ids, texts)`` of the matching chunks in rank order, scrolled once when first asked."""
        if self._chunks is None:
            keys = [metadata_field(k) for k in (KEY_ID, KEY_DOC_RANK, KEY_ORDER)]
            points = scroll_all(self.client, self.collection_name, self.filter, [CONTENT, *keys])
            rows = []
            for p in points:
                payload = p.payload or {}
                meta = payload.get(METADATA) or {}
                rows.append(
                    (
                        int(meta[KEY_DOC_RANK]),
                        int(meta[KEY_ORDER]),
                        str(meta[KEY_ID]),
                        str(payload.get(CONTENT, "")),
                    )
                )
            rows.sort(key=lambda r: (r[0], r[1]))
            self._chunks = [r[2] for r in rows], [r[3] for r in rows]
        return self._chunks

    def ids(self) -> Sequence[str]:
        """Chunk ids of the matching chunks in rank order (scrolled once, on the first call)."""
        return self._rows()[0]

    def texts(self) -> Sequence[str]:
        """Texts of the matching chunks in rank order (scrolled once, on the first call)."""
        return self._rows()[1]
