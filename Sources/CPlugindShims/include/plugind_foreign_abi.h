/*
 * plugind_foreign_abi.h — the two foreign plugin ABIs the worker's adapters drive, declared here
 * from their specifications (LADSPA 1.1, frei0r 1.2) so that building plugind needs neither
 * ladspa.h nor frei0r.h. Only the layouts and function types the adapters call: the worker reads
 * every descriptor field as hostile input (a NULL string, a port count beyond reason).
 */
#ifndef PLUGIND_FOREIGN_ABI_H
#define PLUGIND_FOREIGN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: LADSPA 1.1

/// Port descriptor bits.
#define PLUGIND_LADSPA_PORT_INPUT 0x1
#define PLUGIND_LADSPA_PORT_OUTPUT 0x2
#define PLUGIND_LADSPA_PORT_CONTROL 0x4
#define PLUGIND_LADSPA_PORT_AUDIO 0x8

typedef struct plugind_ladspa_port_range_hint {
    int hint_descriptor;
    float lower_bound;
    float upper_bound;
} plugind_ladspa_port_range_hint;

/// `LADSPA_Descriptor`: field for field, in its order.
typedef struct plugind_ladspa_descriptor {
    unsigned long unique_id;
    const char *_Nullable label;
    int properties;
    const char *_Nullable name;
    const char *_Nullable maker;
    const char *_Nullable copyright;
    unsigned long port_count;
    const int *_Nullable port_descriptors;
    const char *_Nullable const *_Nullable port_names;
    const plugind_ladspa_port_range_hint *_Nullable port_range_hints;
    void *_Nullable implementation_data;
    void *_Nullable (*_Nullable instantiate)(const struct plugind_ladspa_descriptor *_Nonnull descriptor,
                                             unsigned long sample_rate);
    void (*_Nullable connect_port)(void *_Nonnull instance, unsigned long port, float *_Nullable location);
    void (*_Nullable activate)(void *_Nonnull instance);
    void (*_Nullable run)(void *_Nonnull instance, unsigned long sample_count);
    void (*_Nullable run_adding)(void *_Nonnull instance, unsigned long sample_count);
    void (*_Nullable set_run_adding_gain)(void *_Nonnull instance, float gain);
    void (*_Nullable deactivate)(void *_Nonnull instance);
    void (*_Nullable cleanup)(void *_Nonnull instance);
} plugind_ladspa_descriptor;

/// `ladspa_descriptor`, the library's one entry point: NULL past the last plugin.
typedef const plugind_ladspa_descriptor *_Nullable (*plugind_ladspa_descriptor_function)(unsigned long index);

// MARK: frei0r 1.2

typedef struct plugind_frei0r_plugin_info {
    const char *_Nullable name;
    const char *_Nullable author;
    int plugin_type;
    int color_model;
    int frei0r_version;
    int major_version;
    int minor_version;
    int num_params;
    const char *_Nullable explanation;
} plugind_frei0r_plugin_info;

typedef struct plugind_frei0r_param_info {
    const char *_Nullable name;
    int type;
    const char *_Nullable explanation;
} plugind_frei0r_param_info;

typedef struct plugind_frei0r_color {
    float r, g, b;
} plugind_frei0r_color;

typedef struct plugind_frei0r_position {
    double x, y;
} plugind_frei0r_position;

typedef int (*plugind_frei0r_init_function)(void);
typedef void (*plugind_frei0r_deinit_function)(void);
typedef void (*plugind_frei0r_plugin_info_function)(plugind_frei0r_plugin_info *_Nonnull info);
typedef void (*plugind_frei0r_param_info_function)(plugind_frei0r_param_info *_Nonnull info, int index);
typedef void *_Nullable (*plugind_frei0r_construct_function)(unsigned int width, unsigned int height);
typedef void (*plugind_frei0r_destruct_function)(void *_Nonnull instance);
/// `f0r_set_param_value` and `f0r_get_param_value`: `param` points at a value of the parameter's type.
typedef void (*plugind_frei0r_param_value_function)(void *_Nonnull instance, void *_Nonnull param, int index);
typedef void (*plugind_frei0r_update_function)(void *_Nonnull instance, double time, const uint32_t *_Nullable input,
                                               uint32_t *_Nonnull output);
typedef void (*plugind_frei0r_update2_function)(void *_Nonnull instance, double time, const uint32_t *_Nullable input1,
                                                const uint32_t *_Nullable input2, const uint32_t *_Nullable input3,
                                                uint32_t *_Nonnull output);

#ifdef __cplusplus
}
#endif

#endif
