/*
 * pockmcu_softmax_ort_s8 - int8 softmax over rows with onnxruntime's
 * arithmetic (QLinearSoftmax, contrib_ops/cpu/quantization/qlinear_softmax.cc,
 * float32 lookup table):
 *   t = exp_table[255 - max(row) + x]            (float32, made at compile time)
 *   vsum = t_0 + t_1 + ...                       (float32, in row order)
 *   q = nearbyint(float32(float32(t * y_scale) / vsum)) + zp_onnx
 * with y_scale = floor(1 / output scale) and zp_onnx the output zero point in
 * the model's own domain, saturated: uint8 models out = min(q, 255) - 128, int8
 * models min(q, 127) (as onnxruntime 1.31 does).
 * qlinear == 0 stands in for the float Softmax onnxruntime runs when it does not
 * fuse DequantizeLinear/Softmax/QuantizeLinear: p = t * float32(1 / vsum),
 * q = nearbyint(float32(p / y_scale)) + zp_onnx, saturated (y_scale_bits is then
 * the output scale itself). Every float32 operation is done on bit patterns with
 * integer arithmetic (pockmcu_f32_*).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_ort.h"

void pockmcu_softmax_ort_s8(const int8_t *input,
                            int32_t num_rows,
                            int32_t row_size,
                            const uint32_t *exp_table,
                            uint32_t y_scale_bits,
                            int32_t zp_onnx,
                            int32_t is_uint8,
                            int32_t qlinear,
                            int8_t *output)
{
    int32_t r, i;
    for (r = 0; r < num_rows; r++)
    {
        const int8_t *in = input + r * row_size;
        int8_t *out = output + r * row_size;
        int32_t max = -128;
        uint32_t vsum = 0u;
        for (i = 0; i < row_size; i++)
        {
            max = pockmcu_max_i32(max, in[i]);
        }
        for (i = 0; i < row_size; i++)
        {
            vsum = pockmcu_f32_add(vsum, exp_table[255 - max + in[i]]);
        }
        if (!qlinear)
        {
            const uint32_t recip = pockmcu_f32_div(0x3F800000u /* 1.0f */, vsum);
            const int32_t lo = is_uint8 ? 0 : -128;
            for (i = 0; i < row_size; i++)
            {
                const uint32_t p = pockmcu_f32_mul(exp_table[255 - max + in[i]], recip);
                const int32_t q = pockmcu_f32_rint(pockmcu_f32_div(p, y_scale_bits)) + zp_onnx;
                out[i] = (int8_t)(pockmcu_clamp_i32(q, lo, lo + 255) - (is_uint8 ? 128 : 0));
            }
            continue;
        }
        for (i = 0; i < row_size; i++)
        {
            const uint32_t t = exp_table[255 - max + in[i]];
            const int32_t q = pockmcu_f32_rint(pockmcu_f32_div(pockmcu_f32_mul(t, y_scale_bits), vsum)) + zp_onnx;
            if (is_uint8)
            {
                out[i] = (int8_t)(pockmcu_min_i32(q, 255) - 128);
            }
            else
            {
                out[i] = (int8_t)pockmcu_min_i32(q, 127);
            }
        }
    }
}
