/*
 * pockmcu_softmax_xent_grad_s8 - softmax cross-entropy loss and its gradient
 * w.r.t. the logits, from the int8 softmax output (scale 1/256, zp -128).
 *
 *   grad_logits[c] = beta * ((float)(probs[c] + 128) * (1/256.f) - (c == label ? 1.f : 0.f))
 * (the product by 1/256 and the subtraction are exact; one rounding in the
 * product by beta). beta scales the loss (e.g. 1 / batch, or the gradient
 * w.r.t. the int8 logits). Returns nll_table[probs[label] + 128], the
 * compiler-computed -ln(p) of the true class. A label outside [0, classes)
 * yields the gradient without the one-hot term and returns 0.
 */
#include "pockmcu_nn.h"

float pockmcu_softmax_xent_grad_s8(const int8_t *probs,
                                   int32_t classes,
                                   int32_t label,
                                   float beta,
                                   const float *nll_table,
                                   float *grad_logits)
{
    int32_t c;
    for (c = 0; c < classes; c++)
    {
        const float p = (float)((int32_t)probs[c] + 128) * (1.0f / 256.0f);
        grad_logits[c] = beta * (c == label ? p - 1.0f : p);
    }
    if (label < 0 || label >= classes)
    {
        return 0.0f;
    }
    return nll_table[(int32_t)probs[label] + 128];
}
