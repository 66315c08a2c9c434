"""Fine-tune a small BERT built from a config (no download) with HuggingFace's Trainer,
evaluating and saving inside the loop: a script that knows nothing of profile-all.

    python scripts/examples/train_hf_trainer.py --max-steps 20
    profile-all run scripts/examples/train_hf_trainer.py -- --max-steps 20

Needs transformers and accelerate (`pip install transformers accelerate`).
"""

import argparse
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Sentences(Dataset):
    """Token ids whose label is whether token 7 is in them: a task the model can learn."""

    def __init__(self, count: int, length: int, vocab: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(8, vocab, (count, length), generator=generator)
        self.labels = torch.randint(0, 2, (count,), generator=generator)
        self.ids[self.labels == 1, 3] = 7

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--eval-every", type=int, default=10, help="steps between evaluations")
    parser.add_argument("--callback", action="store_true",
                        help="add profile-all's callback (profile-all run adds it to any Trainer)")
    args = parser.parse_args()
    callbacks = []
    if args.callback:
        from profile_all.huggingface import Callback

        callbacks.append(Callback())

    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128, num_labels=2)
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=args.batch_size, eval_strategy="steps",
            eval_steps=args.eval_every, save_strategy="steps", save_steps=args.eval_every,
            logging_steps=args.eval_every, learning_rate=1e-3, report_to="none", use_cpu=True,
            disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=BertForSequenceClassification(config), args=training,
                          train_dataset=Sentences(args.batch_size * args.max_steps, 32, 1000, 0),
                          eval_dataset=Sentences(args.batch_size * 2, 32, 1000, 1),
                          callbacks=callbacks)
        trainer.train()


if __name__ == "__main__":
    main()
